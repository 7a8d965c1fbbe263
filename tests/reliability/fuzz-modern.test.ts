/**
 * A fuzzer of the 2026-07-28 request ladder, against every adapter. Each case is a POST built from
 * labelled parts (a request id, a method and its params, the `_meta` envelope, the routing headers,
 * a session header the request should ignore, a body shape); {@link predict}, a model of the
 * revision's rules written from the bytes that go out, says what the answer must be. Every answer
 * must be the predicted status and JSON-RPC error (or result): never a 5xx, a hang, or a session.
 *
 * The ladder, in order (SEP-2575, SEP-2243, SEP-2663): JSON-RPC shape (-32600), envelope (-32602),
 * routing headers (-32020), version (-32022); then removed methods (404, -32601), tasks/* without
 * the Tasks extension (-32021), and what the server answers. A body without the envelope belongs to
 * the 2025 era: a dated MCP-Protocol-Version from 2026-07-28 on refuses it (-32602).
 *
 * Each case has its own generator: a failure names its seed and index, and `SEED=<s> FUZZ_CASE=<i>`
 * replays that one request. Before the random cases (indices 0, 1, …) run the first cases of
 * negative index that reach each rung of the ladder, so that no seed leaves a rung out. Every
 * deviation is collected (first example per kind) and the test fails at the end with all of them.
 * CI runs ~1,000 cases per adapter; `pnpm test:fuzz` 100,000.
 */
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computed } from '../../packages/fixtures/src/tasks/spec.js';
import { adapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { MODERN, callTool } from '@mcp-kit/testbed/requests';
import { agent, RawSession, RawSse, send } from '@mcp-kit/testbed/raw-client';
import { caseRng, count, LONG, type Rng, seedFor } from '@mcp-kit/testbed/random';
import { messagesOf } from '@mcp-kit/testbed/sse';

const RUNS = count(1_000, 100_000, 'FUZZ_MODERN_RUNS');
/** `FUZZ_CASE=<i>` (with the run's `SEED`) replays one case and prints it whole. */
const ONLY = process.env.FUZZ_CASE === undefined ? undefined : Number(process.env.FUZZ_CASE);
const HANG_MS = 10_000;

const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPS_KEY = 'io.modelcontextprotocol/clientCapabilities';
const INFO_KEY = 'io.modelcontextprotocol/clientInfo';
const LEVEL_KEY = 'io.modelcontextprotocol/logLevel';
const RELATED_KEY = 'io.modelcontextprotocol/related-task';
const TASKS = 'io.modelcontextprotocol/tasks';
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const REMOVED = ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'tasks/result', 'tasks/list'];
/** Methods whose Mcp-Name header carries a body field (SEP-2243, SEP-2663). */
const NAME_FIELD: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};
const SIMPLE_TEXT = 'This is a simple text response for testing.';
const STATIC_URI = 'test://static-text';
/** Tools the fixture runs only as tasks; the first two end by themselves, the others wait for answers. */
const ENDING_TASK_TOOLS = ['failing_job', 'protocol_error_job'];
const WAITING_TASK_TOOLS = ['confirm_delete', 'multi_input'];
const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

// --- the world the cases run in ------------------------------------------------------------------

interface World {
  url: string;
  /** Sessions the handler holds (in-process adapters): a 2026 request must never add one. */
  sessions?: () => number;
  /** A live 2025-era session: its id goes on some 2026 requests, which must ignore it. */
  legacySession: string;
  /** A completed task of this run, so tasks/* can find one. */
  task: { taskId: string; text: string };
}

// --- labelled parts ------------------------------------------------------------------------------

type RequestId = string | number;
const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isRequestId = (v: unknown): v is RequestId => typeof v === 'string' || (typeof v === 'number' && Number.isSafeInteger(v));

/** Code points from printable ASCII to astral symbols, with some controls and lone surrogates. */
const RANGES: Array<[number, number]> = [
  [0x20, 0x7e],
  [0x20, 0x7e],
  [0x20, 0x7e],
  [0xa0, 0xff],
  [0x400, 0x4ff],
  [0x4e00, 0x4fff],
  [0x1f600, 0x1f64f],
  [0xd800, 0xdfff],
  [0x00, 0x1f],
];

function text(rng: Rng, max = 24): string {
  let s = '';
  for (let n = rng.int(0, max); n > 0; n--) {
    const [lo, hi] = rng.pick(RANGES);
    s += String.fromCodePoint(rng.int(lo, hi));
  }
  return s;
}

/** A value a header can carry as is; anything else travels base64-encoded (SEP-2243). */
const headerSafe = (v: string) => /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(v);
const base64 = (v: string) => `=?base64?${Buffer.from(v, 'utf8').toString('base64')}?=`;

interface Case {
  /** The parts it was built from, for the report. */
  labels: string[];
  headers: Record<string, string | string[]>;
  body: unknown;
  text: string;
}

function requestId(rng: Rng, labels: string[]): { id?: unknown } {
  const kind = rng.weighted([
    [6, 'int'],
    [2, 'edge-int'],
    [4, 'string'],
    [1, 'long-string'],
    [2, 'none'],
    [2, 'invalid'],
  ] as const);
  labels.push(`id:${kind}`);
  switch (kind) {
    case 'int':
      return { id: rng.int(-1_000_000, 1_000_000) };
    case 'edge-int':
      return { id: rng.pick([0, -0, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) };
    case 'string':
      return { id: text(rng, 30) };
    case 'long-string':
      return { id: 'i'.repeat(rng.int(100, 5_000)) };
    case 'none':
      return {};
    case 'invalid':
      return { id: rng.pick([1.5, null, true, {}, [], 2 ** 53, 1e21, -0.5, [1]]) };
  }
}

/** A method and its params (without `_meta`). */
function call(rng: Rng, world: World, labels: string[]): { method: unknown; params: Record<string, unknown> } {
  const kind = rng.weighted([
    [10, 'simple'],
    [4, 'greet'],
    [3, 'unknown-tool'],
    [3, 'x-mcp-header'],
    [2, 'slow_compute'],
    [1, 'streaming'],
    [3, 'task-tool'],
    [1, 'task-hint'],
    [2, 'bad-tool-name'],
    [3, 'prompt'],
    [3, 'resource'],
    [6, 'list'],
    [3, 'discover'],
    [5, 'removed'],
    [8, 'tasks'],
    [3, 'unknown-method'],
    [2, 'notification'],
  ] as const);
  labels.push(`call:${kind}`);
  const tool = (name: unknown, args?: Record<string, unknown>) => ({
    method: 'tools/call',
    params: args === undefined ? { name } : { name, arguments: args },
  });
  switch (kind) {
    case 'simple':
      return tool('test_simple_text', rng.chance(0.7) ? {} : undefined);
    case 'greet':
      return tool('greet', { name: text(rng) });
    case 'unknown-tool':
      return tool(rng.pick(['no_such_tool', 'TEST_SIMPLE_TEXT', ' test_simple_text', '=?base64?dGVzdA==?=', text(rng)]), {});
    case 'x-mcp-header':
      return tool(
        'test_x_mcp_header',
        rng.chance(0.75) ? { region: rng.chance(0.5) ? rng.pick(['eu', 'us-east-1', 'ap']) : text(rng) } : {},
      );
    case 'slow_compute':
      return tool('slow_compute', { seconds: 0, label: text(rng, 10) });
    case 'streaming':
      // Their logs (at an envelope logLevel) and progress (with a progressToken) turn the answer into SSE.
      return tool(rng.pick(['test_tool_with_logging', 'test_tool_with_progress']), {});
    case 'task-tool':
      return tool(rng.pick([...ENDING_TASK_TOOLS, ...WAITING_TASK_TOOLS]), {});
    case 'task-hint':
      // A 2025-style task hint: the 2026 revision ignores it (SEP-2663).
      return { method: 'tools/call', params: { name: 'test_simple_text', arguments: {}, task: { ttl: 1_000 } } };
    case 'bad-tool-name':
      return rng.chance(0.5)
        ? tool(rng.pick([5, null, true, {}, ['test_simple_text']]), {})
        : { method: 'tools/call', params: { arguments: {} } };
    case 'prompt':
      return { method: 'prompts/get', params: { name: rng.chance(0.6) ? 'test_simple_prompt' : rng.pick(['no_such_prompt', text(rng)]) } };
    case 'resource':
      return {
        method: 'resources/read',
        params: {
          uri: rng.weighted<unknown>([
            [6, STATIC_URI],
            [2, `test://nope/${text(rng, 8)}`],
            [1, `test://${text(rng)}`],
            [1, 42],
          ]),
        },
      };
    case 'list':
      return { method: rng.pick(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']), params: {} };
    case 'discover':
      return { method: 'server/discover', params: {} };
    case 'removed': {
      const method = rng.pick(REMOVED);
      const params: Record<string, unknown> =
        method === 'initialize'
          ? { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } }
          : method === 'logging/setLevel'
            ? { level: 'info' }
            : method.startsWith('resources/')
              ? { uri: STATIC_URI }
              : method === 'tasks/result'
                ? { taskId: world.task.taskId }
                : {};
      return { method, params };
    }
    case 'tasks': {
      const method = rng.pick(['tasks/get', 'tasks/update', 'tasks/cancel']);
      const taskId = rng.weighted<unknown>([
        [5, world.task.taskId],
        [3, 'AAAAAAAAAAAAAAAAAAAAAA'],
        [1, ''],
        [1, text(rng)],
        [1, world.legacySession],
        [1, 7],
      ]);
      const params: Record<string, unknown> = { taskId };
      if (method === 'tasks/update') {
        const responses = rng.weighted<unknown>([
          [4, { 'input-1': { action: 'accept', content: { confirm: true } } }],
          [2, {}],
          [2, rng.pick([5, 'x', null, []])],
          [1, undefined],
        ]);
        if (responses !== undefined) params.inputResponses = responses;
      }
      return { method, params };
    }
    case 'unknown-method':
      return {
        method: rng.pick(['no/such/method', 'TOOLS/LIST', 'rpc.discover', 'sampling/createMessage', 'elicitation/create']),
        params: {},
      };
    case 'notification':
      return { method: rng.pick(['notifications/cancelled', 'notifications/initialized', 'notifications/no_such']), params: {} };
  }
}

/** The `_meta` envelope, or `undefined` for the version key when the body should not claim the era. */
function envelope(rng: Rng, labels: string[]): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  const version = rng.weighted<[string, unknown]>([
    [40, ['ok', MODERN]],
    [3, ['other-dated', rng.pick(['2025-11-25', '2025-06-18', '2026-07-29', '2027-01-01', '1999-01-01', '9999-12-31'])]],
    [2, ['odd', rng.pick(['v999.0.0', '2026-7-28', 'latest', '2026-07-28T00:00:00Z', '2026-07-28 ', ' 2026-07-28', '2026-07-28\t'])]],
    [2, ['invalid', rng.pick(['', 5, null, true, {}, [], 20260728])]],
    [2, ['absent', undefined]],
  ]);
  labels.push(`version:${version[0]}`);
  if (version[0] !== 'absent') meta[VERSION_KEY] = version[1];

  const caps = rng.weighted<[string, unknown]>([
    [30, ['none', {}]],
    [6, ['elicitation', { elicitation: {}, sampling: {} }]],
    [8, ['tasks', { extensions: { [TASKS]: {} } }]],
    [3, ['tasks+elicitation', { elicitation: {}, extensions: { [TASKS]: {} } }]],
    [2, ['other-extension', { extensions: { 'example.com/other': {} } }]],
    [2, ['roots', { roots: { listChanged: true } }]],
    [1, ['unknown-member', { 'example.com/whatever': 1 }]],
    [2, ['missing', undefined]],
    [2, ['not-object', rng.pick([null, [], 'caps', 5, true])]],
    [
      2,
      [
        'bad-member',
        rng.pick([
          { extensions: 5 },
          { extensions: [] },
          { extensions: null },
          { extensions: { [TASKS]: 5 } },
          { elicitation: 5 },
          { sampling: 'x' },
          { roots: [] },
          { experimental: 1 },
        ]),
      ],
    ],
  ]);
  labels.push(`caps:${caps[0]}`);
  if (caps[0] !== 'missing') meta[CAPS_KEY] = caps[1];

  const info = rng.weighted<[string, unknown]>([
    [20, ['ok', { name: 'fuzz', version: '1.0.0' }]],
    [8, ['absent', undefined]],
    [2, ['odd-strings', { name: text(rng), version: text(rng, 6), title: 'Fuzz' }]],
    [2, ['invalid', rng.pick([null, 'fuzz', [], { name: 'x' }, { version: '1' }, { name: 1, version: '1' }, { name: 'x', version: 2 }])]],
    [
      1,
      [
        'bad-member',
        rng.pick([
          { name: 'x', version: '1', title: 5 },
          { name: 'x', version: '1', icons: 5 },
        ]),
      ],
    ],
  ]);
  labels.push(`info:${info[0]}`);
  if (info[0] !== 'absent') meta[INFO_KEY] = info[1];

  const level = rng.weighted<[string, unknown]>([
    [25, ['absent', undefined]],
    [5, ['ok', rng.pick(LEVELS)]],
    [2, ['invalid', rng.pick(['verbose', 'INFO', '', 5, null, 'warn'])]],
  ]);
  labels.push(`level:${level[0]}`);
  if (level[0] !== 'absent') meta[LEVEL_KEY] = level[1];

  const extra = rng.weighted<[string, Record<string, unknown>]>([
    [20, ['none', {}]],
    [2, ['progress', { progressToken: rng.pick(['p-1', 7]) }]],
    [1, ['custom', { 'example.com/x': { a: 1 } }]],
  ]);
  labels.push(`meta:${extra[0]}`);
  return { ...meta, ...extra[1] };
}

/** Breaks the JSON-RPC shape, or leaves it; a batch wraps the message. */
function shape(rng: Rng, message: Record<string, unknown>, labels: string[]): unknown {
  const kind = rng.weighted([
    [40, 'ok'],
    [1, 'jsonrpc'],
    [1, 'member'],
    [1, 'method'],
    [1, 'progress-token'],
    [1, 'related-task'],
    [2, 'batch'],
  ] as const);
  labels.push(`shape:${kind}`);
  const meta = (message.params as { _meta: Record<string, unknown> })._meta;
  switch (kind) {
    case 'ok':
      return message;
    case 'jsonrpc': {
      const { jsonrpc: _, ...rest } = message;
      return rng.chance(0.3) ? rest : { ...rest, jsonrpc: rng.pick(['1.0', 2, '2']) };
    }
    case 'member':
      return { ...message, ...rng.pick<Record<string, unknown>>([{ extra: 1 }, { result: {} }, { error: { code: 1, message: 'x' } }]) };
    case 'method':
      return { ...message, method: rng.pick(['', 5, null]) };
    case 'progress-token':
      meta.progressToken = rng.pick([1.5, true, null, {}]);
      return message;
    case 'related-task':
      meta[RELATED_KEY] = rng.pick([5, {}, { taskId: 5 }]);
      return message;
    case 'batch': {
      const legacy = { jsonrpc: '2.0', id: 'legacy', method: 'tools/list' };
      return rng.pick([[message], [message, legacy], [legacy, message]]);
    }
  }
}

/** A header value: the natural one mostly, else missing, another value, padded, doubled or recased. */
function variant(rng: Rng, natural: string | undefined, others: string[], label: string, labels: string[]): string | string[] | undefined {
  const kind = rng.weighted([
    [40, 'natural'],
    [3, 'missing'],
    [3, 'other'],
    [1, 'padded'],
    [1, 'duplicate'],
    [1, 'recased'],
  ] as const);
  labels.push(`${label}:${kind}`);
  if (natural === undefined) return kind === 'other' ? rng.pick(others) : undefined;
  switch (kind) {
    case 'natural':
      return natural;
    case 'missing':
      return undefined;
    case 'other':
      return rng.pick(others);
    case 'padded':
      return ` ${natural}\t`;
    case 'duplicate':
      return [natural, natural];
    case 'recased':
      return natural === natural.toUpperCase() ? natural.toLowerCase() : natural.toUpperCase();
  }
}

/** How a client would put a body value in Mcp-Name (or Mcp-Param-*), or one of the ways to get it wrong. */
function nameHeader(rng: Rng, value: unknown, labels: string[], label: string): string | string[] | undefined {
  const plain = typeof value === 'string' ? value : (JSON.stringify(value) ?? 'undefined');
  const natural = headerSafe(plain) ? plain : base64(plain);
  const kind = rng.weighted([
    [38, 'plain'],
    [5, 'base64'],
    [2, 'base64-unpadded'],
    [1, 'base64-bad-char'],
    [1, 'base64-bad-utf8'],
    [1, 'base64-empty'],
  ] as const);
  if (kind === 'plain') return variant(rng, natural, ['test_simple_text', 'greet', 'other-name', STATIC_URI], label, labels);
  labels.push(`${label}:${kind}`);
  switch (kind) {
    case 'base64':
      return base64(plain);
    case 'base64-unpadded':
      return base64(plain).replace(/=+\?=$/, '?=');
    case 'base64-bad-char':
      return `=?base64?${rng.pick(['***', 'ab$d', 'Z', 'dGVzdA=', 'dGV zdA=='])}?=`;
    case 'base64-bad-utf8':
      return `=?base64?${Buffer.from([0xff, 0xfe, 0x41]).toString('base64')}?=`;
    case 'base64-empty':
      return '=?base64??=';
  }
}

function generate(rng: Rng, world: World): Case {
  const labels: string[] = [];
  const id = requestId(rng, labels);
  const meta = envelope(rng, labels);
  const claims = VERSION_KEY in meta;
  const picked = call(rng, world, labels);
  const params = picked.params;
  // A 2025-era initialize would open a session: that era has its own fuzzer (fuzz.test.ts).
  const method = !claims && picked.method === 'initialize' ? 'tools/list' : picked.method;
  const isNotification = typeof method === 'string' && method.startsWith('notifications/');
  const message: Record<string, unknown> = { jsonrpc: '2.0', ...(isNotification ? {} : id), method, params: { ...params, _meta: meta } };
  const body = claims ? shape(rng, message, labels) : message;

  const headers: Record<string, string | string[]> = { ...JSON_HEADERS };
  const put = (name: string, value: string | string[] | undefined) => {
    if (value !== undefined) headers[name] = value;
  };
  const version = meta[VERSION_KEY];
  const naturalVersion = typeof version === 'string' ? version : claims ? JSON.stringify(version) : MODERN;
  put(
    'mcp-protocol-version',
    variant(rng, naturalVersion, ['2025-11-25', '2026-07-29', '2099-01-01', '2026-7-28', 'v999.0.0', 'latest'], 'version-header', labels),
  );
  put(
    'mcp-method',
    variant(rng, String(method), ['tools/call', 'tools/list', 'prompts/get', 'tasks/get', 'initialize'], 'method-header', labels),
  );
  const field = typeof method === 'string' ? NAME_FIELD[method] : undefined;
  if (field !== undefined) put('mcp-name', nameHeader(rng, params[field], labels, 'name-header'));
  else if (rng.chance(0.05)) {
    // A method without a name field ignores Mcp-Name.
    labels.push('name-header:stray');
    put('mcp-name', 'stray-name');
  }
  const args = params.arguments as { region?: unknown } | undefined;
  if (params.name === 'test_x_mcp_header')
    put(
      'mcp-param-region',
      args?.region === undefined ? (rng.chance(0.2) ? 'stray' : undefined) : nameHeader(rng, args.region, labels, 'param-header'),
    );

  const session = rng.weighted([
    [30, 'none'],
    [4, 'live'],
    [2, 'unknown'],
    [1, 'garbage'],
    [1, 'duplicate'],
  ] as const);
  const sessionValue = {
    none: undefined,
    live: world.legacySession,
    unknown: 'AAAAAAAAAAAAAAAAAAAAAA',
    garbage: 'x~../../etc/passwd',
    duplicate: [world.legacySession, world.legacySession],
  }[session];
  // A 2025-era body with the live session and a version that era speaks would be served in it.
  const servedLegacy =
    !claims &&
    session === 'live' &&
    (headers['mcp-protocol-version'] === undefined || legacyVersion(received(headers['mcp-protocol-version'])));
  labels.push(`session:${servedLegacy ? 'none' : session}`);
  if (!servedLegacy) put('mcp-session-id', sessionValue);
  return { labels, headers, body, text: JSON.stringify(body) };
}

// --- the model -----------------------------------------------------------------------------------

type Want =
  | { kind: 'error'; status: number; code: number | number[]; echo: RequestId | undefined; data?: unknown }
  | { kind: 'accepted' }
  | {
      kind: 'result';
      id: RequestId;
      match: Record<string, unknown>;
      exact?: boolean;
      /** Notifications the answer carries before the result (an SSE answer), by method. */
      notifications?: Record<string, number>;
    }
  /** SDK v1 answers an unknown tool with an isError result, SDK v2 with -32602: both are right. */
  | { kind: 'unknown-tool'; id: RequestId };

/** A header as the server reads it: repeated lines joined, HTTP whitespace around it dropped. */
function received(value: string | string[] | undefined): string | undefined {
  return value === undefined ? undefined : (Array.isArray(value) ? value.join(', ') : value).replace(/^[ \t]+|[ \t]+$/g, '');
}

const legacyVersion = (v: string | undefined) => v !== undefined && (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(v);

/** What an undecodable header value compares as: equal to no body value (not even null or a missing one). */
const INVALID = Symbol('invalid base64');

/** SEP-2243's sentinel decoded; {@link INVALID} when its payload is not canonical base64 of UTF-8. */
function decodeHeader(value: string): string | typeof INVALID {
  const m = /^=\?base64\?(.*)\?=$/s.exec(value);
  if (!m) return value;
  const payload = m[1]!;
  if (payload.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(payload)) return INVALID;
  const bytes = Buffer.from(payload, 'base64');
  if (bytes.toString('base64') !== payload) return INVALID;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return INVALID;
  }
}

/** What the SDKs' schemas type in clientCapabilities and clientInfo: members that must be objects. */
function wellFormedCapabilities(caps: Record<string, unknown>): boolean {
  for (const key of ['roots', 'sampling', 'elicitation', 'tasks']) if (key in caps && !isPlain(caps[key])) return false;
  for (const key of ['experimental', 'extensions']) {
    if (!(key in caps)) continue;
    const record = caps[key];
    if (!isPlain(record) || !Object.values(record).every(isPlain)) return false;
  }
  return true;
}

function wellFormedInfo(info: unknown): boolean {
  if (!isPlain(info) || typeof info.name !== 'string' || typeof info.version !== 'string') return false;
  if ('title' in info && typeof info.title !== 'string') return false;
  return !('icons' in info) || Array.isArray(info.icons);
}

function claimsModern(message: unknown): boolean {
  return isPlain(message) && isPlain(message.params) && isPlain(message.params._meta) && VERSION_KEY in message.params._meta;
}

/** The answer the revision gives to these bytes. */
function predict(body: unknown, headers: Record<string, string | string[]>, world: World): Want {
  const h = (name: string) => received(headers[name]);
  if (Array.isArray(body)) {
    if (!body.some(claimsModern)) throw new Error('the generator made a 2025-era batch');
    return { kind: 'error', status: 400, code: -32600, echo: undefined };
  }
  const m = body as Record<string, unknown>;
  const echo = isRequestId(m.id) ? m.id : undefined;
  const refuse = (status: number, code: number | number[], data?: unknown): Want => ({ kind: 'error', status, code, echo, data });
  if (!claimsModern(m)) return predictLegacy(m, h, world, refuse);

  // JSON-RPC shape.
  if (m.jsonrpc !== '2.0' || ('id' in m && echo === undefined)) return refuse(400, -32600);
  if (typeof m.method !== 'string' || m.method === '') return refuse(400, -32600);
  if (Object.keys(m).some((k) => !['jsonrpc', 'id', 'method', 'params'].includes(k))) return refuse(400, -32600);
  const method = m.method;
  const params = m.params as Record<string, unknown>;
  const meta = params._meta as Record<string, unknown>;
  if ('progressToken' in meta && !isRequestId(meta.progressToken)) return refuse(400, -32600);
  if (RELATED_KEY in meta && !(isPlain(meta[RELATED_KEY]) && typeof (meta[RELATED_KEY] as { taskId?: unknown }).taskId === 'string'))
    return refuse(400, -32600);

  // The envelope.
  const version = meta[VERSION_KEY];
  if (typeof version !== 'string' || version === '') return refuse(400, -32602);
  const caps = meta[CAPS_KEY];
  if (!isPlain(caps) || !wellFormedCapabilities(caps)) return refuse(400, -32602);
  if (INFO_KEY in meta && !wellFormedInfo(meta[INFO_KEY])) return refuse(400, -32602);
  if (LEVEL_KEY in meta && !LEVELS.includes(meta[LEVEL_KEY] as string)) return refuse(400, -32602);

  // Routing headers must say what the body says.
  if (h('mcp-protocol-version') !== version) return refuse(400, -32020);
  if (h('mcp-method') !== method) return refuse(400, -32020);
  const field = NAME_FIELD[method];
  if (field !== undefined) {
    const name = h('mcp-name');
    if (name === undefined || decodeHeader(name) !== params[field]) return refuse(400, -32020);
  }

  if (version !== MODERN) return refuse(400, -32022, { supported: [MODERN], requested: version });
  if (!('id' in m)) return { kind: 'accepted' };
  const id = m.id as RequestId;
  const result = (match: Record<string, unknown>, exact = false): Want => ({ kind: 'result', id, match, exact });
  const declared = isPlain(caps.extensions) && caps.extensions[TASKS] !== undefined;

  if (REMOVED.includes(method)) return refuse(404, -32601);
  if (['tasks/get', 'tasks/update', 'tasks/cancel'].includes(method)) {
    if (!declared) return refuse(400, -32021, { requiredCapabilities: { extensions: { [TASKS]: {} } } });
    if (params.taskId !== world.task.taskId) return refuse(200, -32602);
    if (method === 'tasks/get')
      return result({
        resultType: 'complete',
        taskId: world.task.taskId,
        status: 'completed',
        result: { content: [{ type: 'text', text: world.task.text }] },
      });
    if (method === 'tasks/update' && !isPlain(params.inputResponses)) return refuse(400, -32602);
    return result({ resultType: 'complete' }, true);
  }
  switch (method) {
    case 'server/discover':
      return result({ resultType: 'complete', supportedVersions: [MODERN] });
    case 'tools/list':
    case 'prompts/list':
    case 'resources/list':
    case 'resources/templates/list':
      return result({ resultType: 'complete' });
    case 'prompts/get':
      return params.name === 'test_simple_prompt' ? result({ resultType: 'complete', messages: [{ role: 'user' }] }) : refuse(200, -32602);
    case 'resources/read':
      if (params.uri === STATIC_URI) return result({ resultType: 'complete', contents: [{ uri: STATIC_URI }] });
      // SDK v1 parses the URI with `new URL()` first and answers a TypeError as -32603; SDK v2 says -32602.
      return URL.canParse(params.uri as string) ? refuse(200, -32602, { uri: params.uri }) : refuse(200, [-32602, -32603]);
    case 'tools/call':
      return predictToolCall(params, meta, h, declared, id, refuse);
    default:
      return refuse(404, -32601);
  }
}

function predictToolCall(
  params: Record<string, unknown>,
  meta: Record<string, unknown>,
  h: (name: string) => string | undefined,
  declared: boolean,
  id: RequestId,
  refuse: (status: number, code: number | number[], data?: unknown) => Want,
): Want {
  const args = (params.arguments ?? {}) as Record<string, unknown>;
  const text = (value: string): Want => ({
    kind: 'result',
    id,
    match: { resultType: 'complete', content: [{ type: 'text', text: value }] },
  });
  switch (params.name) {
    case 'test_simple_text':
      return text(SIMPLE_TEXT);
    case 'greet':
      return text(`Hello, ${args.name as string}!`);
    case 'slow_compute':
      return text(computed(args.label as string, 0));
    case 'test_tool_with_logging': {
      // Three info logs, sent only to a client that asked for info or more (SEP-2575's logLevel).
      const level = meta[LEVEL_KEY] as string | undefined;
      const logs = level !== undefined && LEVELS.indexOf(level) <= LEVELS.indexOf('info') ? 3 : 0;
      return { ...text('Tool with logging executed successfully'), notifications: { 'notifications/message': logs } } as Want;
    }
    case 'test_tool_with_progress':
      return {
        ...text('Tool with progress executed successfully'),
        notifications: { 'notifications/progress': 'progressToken' in meta ? 3 : 0 },
      } as Want;
    case 'test_x_mcp_header': {
      // SEP-2243: an argument the tool marks with x-mcp-header comes in its Mcp-Param-* header too.
      if (args.region !== undefined) {
        const sent = h('mcp-param-region');
        if (sent === undefined || decodeHeader(sent) !== args.region) return refuse(400, -32020);
      }
      return text(`region=${(args.region as string | undefined) ?? '<none>'}`);
    }
  }
  if (ENDING_TASK_TOOLS.includes(params.name as string) || WAITING_TASK_TOOLS.includes(params.name as string)) {
    if (!declared) return refuse(400, -32021, { requiredCapabilities: { extensions: { [TASKS]: {} } } });
    return { kind: 'result', id, match: { resultType: 'task', status: 'working' } };
  }
  return { kind: 'unknown-tool', id };
}

/** A body without the envelope is of the 2025 era: a modern version header refuses it, else it needs its session. */
function predictLegacy(
  m: Record<string, unknown>,
  h: (name: string) => string | undefined,
  world: World,
  refuse: (status: number, code: number | number[], data?: unknown) => Want,
): Want {
  const version = h('mcp-protocol-version');
  const isRequest = 'method' in m && 'id' in m;
  if (isRequest && version !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(version) && version >= MODERN) return refuse(400, -32602);
  // The session rungs of the 2025 era never echo an id.
  const unechoed = (status: number, code: number): Want => ({ kind: 'error', status, code, echo: undefined });
  const session = h('mcp-session-id');
  if (session === undefined || session === '') return unechoed(400, -32000);
  if (session !== world.legacySession) return unechoed(404, -32001);
  if (!legacyVersion(version)) return unechoed(400, -32000);
  throw new Error('the generator made a 2025-era request its session would serve');
}

// --- running a case ------------------------------------------------------------------------------

function wantLabel(want: Want): string {
  switch (want.kind) {
    case 'error':
      return `${want.status} ${[want.code].flat().join('|')}`;
    case 'accepted':
      return '202';
    case 'result':
      return `200 ${String(want.match.resultType)}`;
    case 'unknown-tool':
      return '200 unknown tool';
  }
}

/** The JSON-RPC messages of an answer: one JSON body, or the data frames of an SSE stream. */
function answerOf(res: RawSse): any[] {
  const type = String(res.headers['content-type'] ?? '');
  if (type.startsWith('text/event-stream')) return messagesOf(res.blocks);
  expect(type, 'content type').toMatch(/^application\/json/);
  return [JSON.parse(res.raw)];
}

function verify(want: Want, res: RawSse): void {
  expect(res.status, 'a 5xx').toBeLessThan(500);
  expect(res.headers['mcp-session-id'], 'a 2026 answer carries a session').toBeUndefined();
  if (want.kind === 'accepted') {
    expect(res.status).toBe(202);
    expect(res.raw).toBe('');
    return;
  }
  if (want.kind === 'error') expect(res.status, 'status').toBe(want.status);
  else expect(res.status, 'status').toBe(200);
  const messages = answerOf(res);
  const answer = messages.at(-1);
  expect(answer.jsonrpc).toBe('2.0');
  // Both schemas make `id` optional on an error and never null; an id that was readable comes back.
  const echo = want.kind === 'error' ? want.echo : want.id;
  if (echo === undefined) expect(answer, 'an id that could not be read is echoed').not.toHaveProperty('id');
  else expect(answer.id, 'the request id').toStrictEqual(JSON.parse(JSON.stringify(echo)));
  switch (want.kind) {
    case 'error':
      expect(answer.error, 'error').toMatchObject({ message: expect.any(String) });
      expect([want.code].flat(), 'error code').toContain(answer.error.code);
      if (want.data !== undefined) expect(answer.error.data, 'error data').toEqual(want.data);
      expect(answer).not.toHaveProperty('result');
      return;
    case 'unknown-tool':
      if (answer.error) expect(answer.error.code, 'unknown tool').toBe(-32602);
      else expect(answer.result, 'unknown tool').toMatchObject({ resultType: 'complete', isError: true });
      return;
    case 'result':
      expect(answer.error, 'an error instead of the result').toBeUndefined();
      if (want.exact) expect(answer.result).toEqual(want.match);
      else expect(answer.result).toMatchObject(want.match);
      if (want.match.resultType === 'complete' && Array.isArray(want.match.content)) expect(answer.result).not.toHaveProperty('isError');
      for (const [method, n] of Object.entries(want.notifications ?? {})) {
        expect(messages.filter((m) => m.method === method).length, method).toBe(n);
        expect(String(res.headers['content-type']), 'an answer with notifications is a stream').toMatch(
          n > 0 ? /^text\/event-stream/ : /^application\/json/,
        );
      }
      expect(
        messages.slice(0, -1).every((m) => m.id === undefined && typeof m.method === 'string'),
        'only notifications before the result',
      ).toBe(true);
  }
}

interface Deviation {
  kind: string;
  count: number;
  first: string;
}

async function runCase(c: Case, world: World): Promise<{ label: string; problem?: { kind: string; detail: string } }> {
  const want = predict(c.body, c.headers, world);
  const label = wantLabel(want);
  const sessionsBefore = world.sessions?.();
  const res = await RawSse.open(world.url, { method: 'POST', headers: c.headers, body: c.text }, { agent });
  try {
    expect(await res.end(HANG_MS), 'how the answer ended').toBe('server');
    verify(want, res);
    if (sessionsBefore !== undefined) expect(world.sessions!(), 'sessions held by the handler').toBe(sessionsBefore);
    return { label };
  } catch (error) {
    res.abort();
    const message = (error as Error).message.split('\n')[0]!;
    const got = `${res.status} ${/"code":(-?\d+)/.exec(res.raw)?.[1] ?? ''}`.trim();
    return {
      label,
      problem: {
        kind: `expected ${label}, got ${got}: ${message.slice(0, 160)}`,
        detail: [
          `parts: ${c.labels.join(' ')}`,
          `headers: ${JSON.stringify(c.headers)}`,
          `body: ${c.text.slice(0, 600)}`,
          `expected: ${JSON.stringify(want)}`,
          `got: ${res.status} ${JSON.stringify(res.headers)}`,
          res.raw.slice(0, 600),
          (error as Error).message.slice(0, 1_000),
        ].join('\n'),
      },
    };
  }
}

/** The answers every run must see at least once: each rung of the ladder, and what passes them all. */
const RUNGS = ['400 -32600', '400 -32602', '400 -32020', '400 -32022', '404 -32601', '400 -32021', '202', '200 complete', '200 -32602'];

/**
 * Indices of the cases that reach the rungs, found from the seed by the model alone: for each rung
 * the first case of index -1, -2, … predicted to reach it. They run before the random cases.
 */
function rungCases(seed: number, world: World): number[] {
  const missing = new Set(RUNGS);
  const found: number[] = [];
  for (let i = -1; missing.size > 0; i--) {
    if (i < -100_000) throw new Error(`seed ${seed}: no case among 100,000 reaches ${[...missing].join(', ')}`);
    const c = generate(caseRng(seed, i), world);
    if (missing.delete(wantLabel(predict(c.body, c.headers, world)))) found.push(i);
  }
  return found;
}

// --- setting up ----------------------------------------------------------------------------------

async function modern(
  url: string,
  id: number,
  method: string,
  params: Record<string, unknown>,
  caps: Record<string, unknown>,
): Promise<any> {
  const body = {
    jsonrpc: '2.0',
    id,
    method,
    params: { ...params, _meta: { [VERSION_KEY]: MODERN, [CAPS_KEY]: caps, [INFO_KEY]: { name: 'fuzz', version: '1.0.0' } } },
  };
  const headers: Record<string, string> = { ...JSON_HEADERS, 'mcp-protocol-version': MODERN, 'mcp-method': method };
  const field = NAME_FIELD[method];
  if (field) headers['mcp-name'] = String(params[field]);
  const res = await send(url, { method: 'POST', headers, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`${method}: ${res.status} ${res.text}`);
  return JSON.parse(res.text).result;
}

/** A task of the fixture that completes by itself: tasks/* cases then have one to find. */
async function completedTask(url: string): Promise<World['task']> {
  const caps = { extensions: { [TASKS]: {} } };
  const label = 'fuzz-planted';
  const created = await modern(url, 1, 'tools/call', { name: 'slow_compute', arguments: { seconds: 1, label } }, caps);
  expect(created).toMatchObject({ resultType: 'task', status: 'working' });
  for (let i = 2; ; i++) {
    const task = await modern(url, i, 'tasks/get', { taskId: created.taskId }, caps);
    if (task.status === 'completed') return { taskId: created.taskId, text: computed(label, 1) };
    expect(task.status).toBe('working');
    // The task says how often to ask.
    await new Promise((resolve) => setTimeout(resolve, task.pollIntervalMs));
  }
}

describe.each(adapters)('fuzz 2026-07-28: $name', (adapter) => {
  let sut: ServerUnderTest;
  let world: World;
  let legacy: RawSession;

  beforeAll(async () => {
    // The legacy session idles through the whole run (2026 requests naming it must not touch it).
    sut = await adapter.start({ retryMs: 100, sessionIdleTtlMs: 24 * 3_600_000 });
    legacy = await RawSession.open(sut.url);
    const handler = sut.inProcess?.handler;
    world = {
      url: sut.url,
      sessions: handler ? () => handler.sessionCount : undefined,
      legacySession: legacy.sessionId,
      task: await completedTask(sut.url),
    };
  });
  afterAll(async () => {
    await sut?.close();
  });

  it(
    `${ONLY === undefined ? RUNS : 1} random 2026 requests: the predicted status and error, never a 5xx, a hang or a session`,
    async () => {
      const seed = seedFor(`fuzz-modern ${adapter.name}`);
      const started = performance.now();
      const outcomes = new Map<string, number>();
      const deviations = new Map<string, Deviation>();
      let cases = 0;
      let hangs = 0;
      const indices = ONLY === undefined ? [...rungCases(seed, world), ...Array.from({ length: RUNS }, (_, i) => i)] : [ONLY];
      for (const i of indices) {
        const c = generate(caseRng(seed, i), world);
        if (ONLY !== undefined)
          console.log(`[fuzz-modern ${adapter.name}] case ${i}: ${c.labels.join(' ')}\n${JSON.stringify(c.headers)}\n${c.text}`);
        const { label, problem } = await runCase(c, world);
        cases++;
        outcomes.set(label, (outcomes.get(label) ?? 0) + 1);
        if (!problem) continue;
        if (problem.kind.includes('still open')) hangs++;
        const seen = deviations.get(problem.kind);
        if (seen) seen.count++;
        else deviations.set(problem.kind, { kind: problem.kind, count: 1, first: `SEED=${seed} FUZZ_CASE=${i}\n${problem.detail}` });
        if (hangs > 20) break;
      }
      const ms = Math.round(performance.now() - started);
      const figures = [...outcomes].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}: ${n}`);
      console.log(`[fuzz-modern ${adapter.name}] ${cases} cases in ${ms} ms (seed ${seed}); outcomes ${figures.join(', ')}`);

      // The legacy session whose id rode on 2026 requests is still there and still served.
      const check = await legacy.postSse(callTool(99, 'test_simple_text'));
      expect(await check.end()).toBe('server');
      expect(check.status, check.raw).toBe(200);
      expect(check.messages.at(-1)?.message.id, check.raw).toBe(99);
      if (world.sessions) expect(world.sessions()).toBe(1);

      const report = [...deviations.values()].map((d) => `${d.count}× ${d.kind}\n  first: ${d.first.replaceAll('\n', '\n  ')}`);
      expect(report, `${deviations.size} kinds of deviation from the model`).toEqual([]);
      expect(sut.errors.map((e) => e.message)).toEqual([]);
      // The run reached every rung of the ladder (the rung cases make sure of it, whatever the seed).
      if (ONLY === undefined) for (const rung of RUNGS) expect(outcomes.get(rung) ?? 0, `cases predicted ${rung}`).toBeGreaterThan(0);
    },
    LONG ? 3_600_000 : 120_000,
  );
});
