/**
 * The Python MCP SDK client (`mcp` 2.3.0, from the registry into a venv cached outside the checkout, see packages/testbed/src/python.ts) against every
 * adapter, in `legacy` (a 2025 session that polls by reconnecting), `2026-07-28` (adopted without
 * a probe) and `auto` (probes server/discover and must land on 2026-07-28 here); and against
 * endpoints serving one era (the `eras` option), where auto must land on that era and the other
 * mode is refused. One Python process runs python_client.py for every target × mode at once; the
 * assertions live here.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adapters,
  type Adapter,
  type HarnessOptions,
  type ServerUnderTest,
  fixtures,
  type Fixture,
  serve,
  SIMPLE_TEXT,
} from '@mcp-kit/testbed/adapters';
import { pythonVenv, runPythonJson } from '@mcp-kit/testbed/python';
import { completed, oneTo, POLLED_CLOSES, POLLED_TASK, STREAMED_TASK, UNCLOSABLE_TASK } from '@mcp-kit/testbed/long-task';
import { LEGACY, MODERN } from '@mcp-kit/testbed/requests';

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
  status: number | null;
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
  errorCode?: number | null;
}

/** A client mode and what it must end up in: an era, or refused by an endpoint that lacks its era. */
interface ModeCase {
  mode: string;
  era: string | 'refused';
  longTask: Record<string, number>;
}

/** Every fixture on every adapter, both eras served. */
const matrix: ModeCase[] = [
  { mode: 'legacy', era: LEGACY, longTask: POLLED_TASK },
  { mode: MODERN, era: MODERN, longTask: STREAMED_TASK },
  // With closeEvery: for a 2026 client closeSSEStream declines and the call stays on its stream.
  { mode: 'auto', era: MODERN, longTask: UNCLOSABLE_TASK },
];

interface Target {
  key: string;
  fixture: Fixture;
  adapter: Adapter;
  options: HarnessOptions;
  cases: ModeCase[];
}

const targets: Target[] = [
  ...fixtures.flatMap((fixture) =>
    adapters.map((adapter) => ({ key: `${fixture.name} on ${adapter.name}`, fixture, adapter, options: {}, cases: matrix })),
  ),
  // One era served: auto must land on it (and a fallen-back session still polls); the other mode is refused.
  ...adapters.flatMap((adapter) => [
    {
      key: `legacy-only endpoint (eras: ['legacy']) on ${adapter.name}`,
      fixture: fixtures.at(-1)!,
      adapter,
      options: { eras: ['legacy' as const] },
      cases: [
        { mode: 'auto', era: LEGACY, longTask: POLLED_TASK },
        { mode: MODERN, era: 'refused', longTask: STREAMED_TASK },
      ],
    },
    {
      key: `modern-only endpoint (eras: ['modern']) on ${adapter.name}`,
      fixture: fixtures.at(-1)!,
      adapter,
      options: { eras: ['modern' as const] },
      cases: [
        { mode: 'auto', era: MODERN, longTask: STREAMED_TASK },
        { mode: 'legacy', era: 'refused', longTask: POLLED_TASK },
      ],
    },
  ]),
];

const servers = new Map<string, ServerUnderTest>();
const results = new Map<string, Map<string, PythonRun>>();

let python: string;
beforeAll(async () => {
  python = await pythonVenv('mcp-2.3.0', REQUIREMENTS);
}, 320_000);

beforeAll(async () => {
  // One after another: serve() may set the environment a `next start` inherits.
  for (const t of targets) servers.set(t.key, await serve(t.adapter, t.fixture, t.options));
  const plan = {
    timeoutS: RUN_TIMEOUT_S,
    targets: targets.map((t) => ({
      key: t.key,
      url: servers.get(t.key)!.url,
      runs: t.cases.map(({ mode, longTask }) => ({ mode, longTask })),
    })),
  };
  // The runs go concurrently, each bounded by RUN_TIMEOUT_S inside Python; this bounds the process.
  const out = await runPythonJson<Record<string, PythonRun[]>>(python, script, [JSON.stringify(plan)], 3 * RUN_TIMEOUT_S * 1000);
  for (const [key, runs] of Object.entries(out)) results.set(key, new Map(runs.map((r) => [r.mode, r])));
}, 120_000);

afterAll(async () => {
  for (const sut of servers.values()) await sut.close();
});

describe.each(targets)('Python SDK client: $key', ({ key, cases }) => {
  describe.each(cases)('mode $mode', ({ mode, era, longTask }) => {
    const outcome = () => results.get(key)!.get(mode)!;
    const run = () => {
      const r = outcome();
      expect(r.error, r.error).toBeUndefined();
      return r;
    };

    if (era === 'refused') {
      it('is refused at its first request with -32022, and calls nothing', () => {
        const r = outcome();
        expect(r.error).toBeDefined();
        expect(r.requests[0]!.status).toBe(400);
        expect(r.errorCode, r.error).toBe(-32022);
        expect(r.requests.filter((q) => q.rpc === 'tools/call' && q.status === 200)).toEqual([]);
      });
      return;
    }

    it(`negotiates ${era} and calls test_simple_text`, () => {
      const r = run();
      expect(r.protocolVersion).toBe(era);
      expect(r.simpleText).toEqual({ content: [{ type: 'text', text: SIMPLE_TEXT }], isError: false });
      // auto learns the server from server/discover; the other modes do not ask.
      expect(r.requests.filter((q) => q.rpc === 'server/discover')).toHaveLength(mode === 'auto' ? 1 : 0);
      // Every request succeeded, except the probe of a client that then fell back to legacy.
      const refusedProbe = (q: PythonRequest) => q.rpc === 'server/discover' && era === LEGACY;
      // (A standalone GET may have had no answer yet when the client left.)
      const answered = (q: PythonRequest) => q.method === 'POST' || q.status !== null;
      for (const q of r.requests.filter((q) => !refusedProbe(q) && answered(q))) {
        expect(q.status, `${q.method} ${q.rpc ?? ''}`).toBeOneOf([200, 202, 204]);
      }
      if (era === MODERN) {
        expect(r.requests.filter((q) => q.rpc === 'initialize')).toEqual([]);
        for (const q of r.requests) {
          expect(q.method, 'a 2026 client only POSTs').toBe('POST');
          expect(q.sessionId).toBeNull();
          expect(q.protocolVersion).toBe(MODERN);
        }
      } else {
        expect(r.requests.filter((q) => q.rpc === 'initialize')).toHaveLength(1);
        const inSession = r.requests.filter((q) => q.rpc !== 'initialize' && q.rpc !== 'server/discover' && q.method !== 'DELETE');
        for (const q of inSession) expect(q.sessionId, `${q.method} ${q.rpc ?? ''}`).toBeTruthy();
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
