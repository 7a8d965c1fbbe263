/**
 * The Python MCP SDK client (`mcp` 2.3.0, from the registry into a venv under .tmp/) against every
 * adapter, in `legacy` (a 2025 session that polls by reconnecting), `2026-07-28` (adopted without
 * a probe) and `auto` (probes server/discover and must land on 2026-07-28 here). One Python process
 * runs python_client.py for every fixture × adapter × mode at once; the assertions live here.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adapters, type ServerUnderTest } from '../support/adapters.js';
import { pythonVenv, runPythonJson } from '../support/python.js';
import {
  completed,
  fixtures,
  LEGACY,
  MODERN,
  oneTo,
  POLLED_CLOSES,
  POLLED_TASK,
  serve,
  SIMPLE_TEXT,
  STREAMED_TASK,
  UNCLOSABLE_TASK,
} from './harness.js';

const script = fileURLToPath(new URL('./python_client.py', import.meta.url));
const REQUIREMENTS = ['mcp==2.3.0'];
/** Per mode, inside Python (connect and both calls); the process as a whole gets a bound too. */
const RUN_TIMEOUT_S = 20;

interface PythonRequest {
  method: string;
  rpc: string | null;
  lastEventId: string | null;
  sessionId: string | null;
  protocolVersion: string | null;
}

interface CallOutcome {
  content: unknown[];
  isError: boolean;
}

interface PythonRun {
  mode: string;
  protocolVersion?: string;
  simpleText?: CallOutcome;
  longTask?: CallOutcome;
  logSteps: number[];
  progress: number[];
  requests: PythonRequest[];
  error?: string;
}

interface ModeCase {
  mode: string;
  era: string;
  longTask: Record<string, number>;
}

const cases: ModeCase[] = [
  { mode: 'legacy', era: LEGACY, longTask: POLLED_TASK },
  { mode: MODERN, era: MODERN, longTask: STREAMED_TASK },
  // With closeEvery: for a 2026 client closeSSEStream declines and the call stays on its stream.
  { mode: 'auto', era: MODERN, longTask: UNCLOSABLE_TASK },
];

/** Every fixture on every adapter, served at once so one Python process covers the matrix. */
const targets = fixtures.flatMap((fixture) => adapters.map((adapter) => ({ fixture, adapter, key: `${fixture.name} on ${adapter.name}` })));
const servers = new Map<string, ServerUnderTest>();
const results = new Map<string, Map<string, PythonRun>>();

let python: string;
beforeAll(async () => {
  python = await pythonVenv('mcp-2.3.0', REQUIREMENTS);
}, 320_000);

beforeAll(async () => {
  // One after another: serve() may set the environment a `next start` inherits.
  for (const t of targets) servers.set(t.key, await serve(t.adapter, t.fixture));
  const plan = {
    timeoutS: RUN_TIMEOUT_S,
    targets: targets.map((t) => ({
      key: t.key,
      url: servers.get(t.key)!.url,
      runs: cases.map(({ mode, longTask }) => ({ mode, longTask })),
    })),
  };
  // The runs go concurrently, each bounded by RUN_TIMEOUT_S inside Python; this bounds the process.
  const out = await runPythonJson<Record<string, PythonRun[]>>(python, script, [JSON.stringify(plan)], 3 * RUN_TIMEOUT_S * 1000);
  for (const [key, runs] of Object.entries(out)) results.set(key, new Map(runs.map((r) => [r.mode, r])));
}, 120_000);

afterAll(async () => {
  for (const sut of servers.values()) await sut.close();
});

describe.each(fixtures)('$name', (fixture) => {
  describe.each(adapters)('Python SDK client on $name', (adapter) => {
    const key = `${fixture.name} on ${adapter.name}`;

    describe.each(cases)('mode $mode', ({ mode, era, longTask }) => {
      const run = () => {
        const r = results.get(key)!.get(mode)!;
        expect(r.error, r.error).toBeUndefined();
        return r;
      };

      it(`negotiates ${era} and calls test_simple_text`, () => {
        const r = run();
        expect(r.protocolVersion).toBe(era);
        expect(r.simpleText).toEqual({ content: [{ type: 'text', text: SIMPLE_TEXT }], isError: false });
        if (era === MODERN) {
          expect(r.requests.filter((q) => q.rpc === 'initialize')).toEqual([]);
          for (const q of r.requests) {
            expect(q.method, 'a 2026 client only POSTs').toBe('POST');
            expect(q.sessionId).toBeNull();
            expect(q.protocolVersion).toBe(MODERN);
          }
          // auto learns the server from server/discover; a pinned mode adopts without asking.
          expect(r.requests.filter((q) => q.rpc === 'server/discover')).toHaveLength(mode === 'auto' ? 1 : 0);
        } else {
          expect(r.requests.filter((q) => q.rpc === 'initialize')).toHaveLength(1);
          expect(r.requests.filter((q) => q.rpc !== 'initialize' && q.method !== 'DELETE').every((q) => q.sessionId)).toBe(true);
        }
      });

      it(
        era === MODERN
          ? 'long_task: every step once, in order, as progress and as logs, then the result, without reconnecting'
          : 'long_task with closeEvery: reconnects after each close, every step once and in order, then the result',
        () => {
          const r = run();
          expect(r.longTask).toEqual({ content: completed(longTask.steps), isError: false });
          expect(r.logSteps).toEqual(oneTo(longTask.steps));
          expect(r.progress).toEqual(oneTo(longTask.steps));
          const resumes = r.requests.filter((q) => q.method === 'GET' && q.lastEventId);
          if (era === MODERN) {
            expect(resumes).toEqual([]);
            expect(r.requests.filter((q) => q.rpc === 'tools/call')).toHaveLength(2);
          } else {
            expect(resumes.length).toBeGreaterThanOrEqual(1);
            expect(resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
            expect(new Set(resumes.map((q) => q.lastEventId)).size).toBe(resumes.length);
          }
          expect(servers.get(key)!.errors).toEqual([]);
        },
      );
    });
  });
});
