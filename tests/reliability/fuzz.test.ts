/**
 * A property-based fuzzer (fast-check) over methods, headers and bodies, against every adapter.
 * Each case is a request built from labelled parts (a Host that is allowed or not, a body that is
 * broken JSON, a request the SDK would not recognise, ...); a model of the rules predicts the
 * answer. Every answer must be the predicted 2xx, or a 4xx with the predicted JSON-RPC error; never
 * a 5xx, a hang, a crash, or a byte of another session's data.
 *
 * CI runs a sample; `pnpm test:fuzz` runs ≥ 100,000 cases per adapter. `SEED=` replays a run.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import { adapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { LEGACY, initializeRequest, callTool } from '@mcp-kit/testbed/requests';
import { agent, RawSession, RawSse, splitId } from '@mcp-kit/testbed/raw-client';
import { registerRemember, registerWhoami, ServerCounter } from '@mcp-kit/testbed/probes';
import { count, LONG, seedFor } from '@mcp-kit/testbed/random';

const RUNS = count(1_500, 100_000, 'FUZZ_RUNS');
const MAX_BODY = 64 * 1024;

// --- the world the cases run in ------------------------------------------------------------------

interface World {
  url: string;
  port: number;
  inProcess: boolean;
  /** The fuzzer's own session: every case that names a session names this one. */
  a: RawSession;
  /** A completed stream of A: its token and every frame as sent, to check replays byte for byte. */
  aDone: { token: string; frames: string[] };
  aStandalone: string;
  /** The victim: nothing of it may ever show up in an answer to anyone else. */
  b: RawSession;
  forbidden: string[];
  deletedA: number;
  created: number;
}

async function openA(world: Pick<World, 'url'>): Promise<Pick<World, 'a' | 'aDone' | 'aStandalone'>> {
  const a = await RawSession.open(world.url);
  const done = await a.postSse(callTool('setup', 'long_task', { steps: 5, intervalMs: 0 }));
  await done.end();
  const frames = done.blocks.slice(1).map((b) => b.raw);
  const standalone = await a.get();
  const priming = await standalone.next();
  standalone.abort();
  return { a, aDone: { token: splitId(done.blocks[0]!.id!).token, frames }, aStandalone: splitId(priming.id!).token };
}

async function openB(world: Pick<World, 'url' | 'inProcess'>): Promise<{ b: RawSession; forbidden: string[] }> {
  const b = await RawSession.open(world.url);
  const secret = `secret-${randomBytes(16).toString('hex')}`;
  const forbidden = [b.sessionId, secret];
  const plant = [callTool(1, 'long_task', { steps: 3, intervalMs: 0 }), ...(world.inProcess ? [callTool(2, 'remember', { secret })] : [])];
  for (const call of plant) {
    const s = await b.postSse(call);
    await s.end();
    for (const block of s.blocks) if (block.id) forbidden.push(splitId(block.id).token);
  }
  const standalone = await b.get();
  forbidden.push(splitId((await standalone.next()).id!).token);
  standalone.abort();
  return { b, forbidden: [...new Set(forbidden)] };
}

// --- labelled parts ------------------------------------------------------------------------------

const printable = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 40 });
/** Values that can never be one of ours: a prefix no host name, token or version starts with. */
const garbage = printable.map((s) => `x~${s}`);

type Labelled<T> = { label: string; value: T };
const part = <T>(label: string, value: T): Labelled<T> => ({ label, value });

const hostArb = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.constantFrom('127.0.0.1:PORT', 'localhost:PORT', 'localhost', '[::1]:PORT', 'LOCALHOST:PORT').map((v) => part('ok', v)),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('evil.example', 'evil.example:PORT', 'localhost.evil.example:PORT', '127.0.0.1.nip.io:PORT')
      .map((v) => part('foreign', v)),
  },
  { weight: 1, arbitrary: garbage.map((v) => part('foreign', v)) },
);

const originArb = fc.oneof(
  { weight: 10, arbitrary: fc.constant(part('none', undefined as string | undefined)) },
  {
    weight: 4,
    arbitrary: fc
      .constantFrom('null', 'http://localhost:PORT', 'http://127.0.0.1:PORT', 'https://localhost', 'http://[::1]:PORT')
      .map((v) => part('ok', v)),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('http://evil.example', 'http://localhost.evil.example', 'not a url', 'http://127.0.0.2')
      .map((v) => part('foreign', v)),
  },
  { weight: 1, arbitrary: garbage.map((v) => part('foreign', v)) },
);

/** [label, value, acceptable for POST, acceptable for GET]. */
const ACCEPTS: Array<[string | undefined, boolean, boolean]> = [
  ['application/json, text/event-stream', true, true],
  ['text/event-stream, application/json;q=0.5', true, true],
  ['TEXT/EVENT-STREAM, APPLICATION/JSON', true, true],
  ['*/*', true, true],
  ['text/*, application/*', true, true],
  ['application/json', false, false],
  ['text/event-stream', false, true],
  ['application/json;q=0, text/event-stream', false, true],
  [undefined, false, false],
];
const acceptArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant(ACCEPTS[0]!) },
  { weight: 6, arbitrary: fc.constantFrom(...ACCEPTS.slice(1)) },
  { weight: 1, arbitrary: garbage.map((v): [string, boolean, boolean] => [v, false, false]) },
);

const contentTypeArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant(part('ok', 'application/json' as string | undefined)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('application/json; charset=utf-8', 'Application/JSON').map((v) => part('ok', v as string | undefined)),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', undefined)
      .map((v) => part('bad', v)),
  },
  { weight: 1, arbitrary: garbage.map((v) => part('bad', v as string | undefined)) },
);

const versionArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant(LEGACY as string | undefined) },
  { weight: 3, arbitrary: fc.constantFrom<string | undefined>(undefined, ...SUPPORTED_PROTOCOL_VERSIONS, '1999-01-01', '2025-11-26') },
  { weight: 1, arbitrary: garbage },
);

const sessionArb = fc.oneof(
  { weight: 14, arbitrary: fc.constant('A') },
  { weight: 3, arbitrary: fc.constantFrom('none', 'empty', 'unknown', 'duplicate') },
  { weight: 1, arbitrary: fc.constant('garbage') },
);

const cursorArb = fc.oneof(
  { weight: 6, arbitrary: fc.constant(part('none', 0)) },
  { weight: 1, arbitrary: fc.constant(part('empty', 0)) },
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 6 }).map((k) => part('a-done', k)) },
  { weight: 2, arbitrary: fc.integer({ min: 7, max: 10 ** 12 }).map((k) => part('a-past', k)) },
  { weight: 2, arbitrary: fc.constant(part('a-standalone', 0)) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 4 }).map((k) => part('b', k)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.array(fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), { minLength: 22, maxLength: 22 }),
        fc.integer({ min: 0, max: 100 }),
      )
      .map(([chars, k]) => ({ ...part('guess', k), token: chars.join('') })),
  },
  { weight: 2, arbitrary: fc.constantFrom('malformed', 'leading-zero', 'duplicate', 'huge-seq').map((l) => part(l, 0)) },
);

// --- bodies --------------------------------------------------------------------------------------

type RequestId = string | number;
interface Body {
  kind: 'message' | 'parse' | 'oversized' | 'none';
  text: string;
  /** The parsed value, for kind 'message'. */
  value?: unknown;
}

const requestIdArb: fc.Arbitrary<RequestId> = fc.oneof(
  fc.integer({ min: -1000, max: 1000 }),
  fc.constantFrom(0, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER),
  fc.string({ maxLength: 20 }),
  fc.integer({ min: 1, max: 20_000 }).map((n) => 'i'.repeat(n)),
);

function quickRequests(inProcess: boolean): fc.Arbitrary<{ method: string; params?: unknown }> {
  return fc.constantFrom(
    { method: 'ping' },
    { method: 'tools/list' },
    { method: 'resources/list', params: {} },
    { method: 'prompts/list' },
    { method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } },
    { method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } },
    { method: 'tools/call', params: { name: inProcess ? 'whoami' : 'test_simple_text', arguments: {} } },
    { method: 'no/such/method', params: { x: 1 } },
    { method: 'tools/call', params: { name: 'test_simple_text', arguments: {}, _meta: { progressToken: 'p' } } },
    {
      method: 'tools/call',
      params: { name: 'test_simple_text', arguments: {}, _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't' } } },
    },
  );
}

const json = (value: unknown): Body => ({ kind: 'message', text: JSON.stringify(value), value });

/** Near misses: shapes a lenient parser might take but the SDK will not recognise as a message. */
const nearMissArb = fc.oneof(
  fc.constantFrom(
    { jsonrpc: '2.0', id: 1, method: 'ping', params: [] },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: [1, 2] },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: null },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: 'x' },
    { jsonrpc: '2.0', id: 1, method: 'ping', extra: true },
    { jsonrpc: '2.0', id: 1, method: 'ping', result: {} },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: 5 } },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: [] } },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: { progressToken: 1.5 } } },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: { progressToken: true } } },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: { 'io.modelcontextprotocol/related-task': 5 } } },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: { 'io.modelcontextprotocol/related-task': { taskId: 5 } } } },
    { jsonrpc: '2.0', method: 'notifications/initialized', params: [] },
    { jsonrpc: '2.0', method: 'notifications/initialized', id: null },
    { jsonrpc: '2.0', method: 'notifications/initialized', extra: 1 },
    { jsonrpc: '2.0', id: 1, result: [] },
    { jsonrpc: '2.0', id: 1, result: null },
    { jsonrpc: '2.0', id: 1, result: 'ok' },
    { jsonrpc: '2.0', id: 1, result: {}, extra: 1 },
    { jsonrpc: '2.0', id: 1, result: {}, error: { code: 1, message: 'x' } },
    { jsonrpc: '2.0', id: 1, error: { code: 1.5, message: 'x' } },
    { jsonrpc: '2.0', id: 1, error: { code: 1 } },
    { jsonrpc: '2.0', id: 1, error: { message: 'x' } },
    { jsonrpc: '2.0', id: 1, error: { code: 1, message: 2 } },
    { jsonrpc: '2.0', id: 1.5, method: 'ping' },
    { jsonrpc: '2.0', id: 1e21, method: 'ping' },
    { jsonrpc: '2.0', id: 2 ** 53, method: 'ping' },
    { jsonrpc: '2.0', id: null, method: 'ping' },
    { jsonrpc: '2.0', id: true, method: 'ping' },
    { jsonrpc: '2.0', id: {}, method: 'ping' },
    { jsonrpc: '2.0', id: 1, method: '' },
    { jsonrpc: '2.0', id: 1, method: 7 },
    { jsonrpc: '1.0', id: 1, method: 'ping' },
    { jsonrpc: 2, id: 1, method: 'ping' },
    { id: 1, method: 'ping' },
    { jsonrpc: '2.0' },
    {},
    [],
    null,
    42,
    'ping',
  ),
  fc
    .record({ jsonrpc: fc.constant('2.0'), id: requestIdArb, method: fc.constant('ping') }, { requiredKeys: ['jsonrpc', 'method'] })
    .chain((base) =>
      fc
        .dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { minKeys: 1, maxKeys: 3 })
        .map((extra) => ({ ...extra, ...base })),
    ),
);

function bodyArb(inProcess: boolean): fc.Arbitrary<Body> {
  const request = fc.tuple(requestIdArb, quickRequests(inProcess)).map(([id, r]) => json({ jsonrpc: '2.0', id, ...r }));
  const notification = fc
    .constantFrom('notifications/initialized', 'notifications/cancelled', 'notifications/roots/list_changed', 'notifications/no_such')
    .map((method) =>
      json(
        method === 'notifications/cancelled'
          ? { jsonrpc: '2.0', method, params: { requestId: 999_999, reason: 'fuzz' } }
          : { jsonrpc: '2.0', method },
      ),
    );
  const response = fc.oneof(
    requestIdArb.map((id) => json({ jsonrpc: '2.0', id, result: {} })),
    requestIdArb.map((id) => json({ jsonrpc: '2.0', id, error: { code: -1, message: 'no', data: [1] } })),
  );
  const init = fc.oneof(
    requestIdArb.map((id) => json(initializeRequest(id))),
    fc
      .constantFrom(
        { jsonrpc: '2.0', id: 1, method: 'initialize' },
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '1999-01-01', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
        },
        { jsonrpc: '2.0', id: 1, method: 'initialize', params: [] },
        { jsonrpc: '2.0', method: 'initialize' },
        { method: 'initialize' },
      )
      .map(json),
  );
  const broken = fc
    .oneof(
      fc.constantFrom(
        '',
        ' ',
        '{',
        '{"jsonrpc": "2.0", "id": 1,',
        '[',
        'nul',
        '{"a":1}}',
        '\u0000',
        '{"jsonrpc":"2.0","id":1,"method":"ping"',
        "{'jsonrpc':'2.0'}",
      ),
      fc.string({ maxLength: 60 }).filter((s) => !isJson(s)),
    )
    .map((text): Body => ({ kind: 'parse', text }));
  const batch = fc.array(fc.oneof(request, notification), { minLength: 0, maxLength: 4 }).map((items) => json(items.map((i) => i.value)));
  // Written out by hand: JSON.stringify itself runs out of stack on the deepest of these.
  const deep = fc.tuple(requestIdArb, fc.integer({ min: 10, max: 30_000 }), fc.boolean()).map(([id, depth, arrays]): Body => {
    const value = { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_simple_text', arguments: { deep: 'DEEP' } } };
    const nested = arrays ? `${'['.repeat(depth)}0${']'.repeat(depth)}` : `${'{"d":'.repeat(depth)}0${'}'.repeat(depth)}`;
    return { kind: 'message', text: JSON.stringify(value).replace('"DEEP"', nested), value };
  });
  const oversized = fc.integer({ min: MAX_BODY + 1, max: 4 * MAX_BODY }).map((n): Body => ({
    kind: 'oversized',
    text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(n) } }),
  }));
  const anyJson = fc.jsonValue({ maxDepth: 4 }).map(json);
  const anyMessage = fc
    .record(
      {
        jsonrpc: fc.constantFrom('2.0', '2.0', '1.0'),
        id: fc.oneof(requestIdArb, fc.jsonValue({ maxDepth: 1 })),
        method: fc.oneof(fc.constantFrom('ping', 'tools/list', 'initialize'), fc.string()),
        params: fc.jsonValue({ maxDepth: 3 }),
        result: fc.jsonValue({ maxDepth: 2 }),
        error: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    )
    .map(json);
  return fc.oneof(
    { weight: 10, arbitrary: request },
    { weight: 2, arbitrary: notification },
    { weight: 2, arbitrary: response },
    { weight: 2, arbitrary: init },
    { weight: 5, arbitrary: nearMissArb.map(json) },
    { weight: 3, arbitrary: broken },
    { weight: 1, arbitrary: batch },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: oversized },
    { weight: 2, arbitrary: anyJson },
    { weight: 4, arbitrary: anyMessage },
  );
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const methodArb = fc.oneof(
  { weight: 12, arbitrary: fc.constant('POST') },
  { weight: 6, arbitrary: fc.constant('GET') },
  { weight: 2, arbitrary: fc.constant('DELETE') },
  { weight: 2, arbitrary: fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD') },
);

interface Case {
  method: string;
  host: Labelled<string>;
  origin: Labelled<string | undefined>;
  accept: [string | undefined, boolean, boolean];
  contentType: Labelled<string | undefined>;
  version: string | undefined;
  session: string;
  cursor: Labelled<number> & { token?: string };
  body: Body;
}

function caseArb(inProcess: boolean): fc.Arbitrary<Case> {
  return fc.record({
    method: methodArb,
    host: hostArb,
    origin: originArb,
    accept: acceptArb,
    contentType: contentTypeArb,
    version: versionArb,
    session: sessionArb,
    cursor: cursorArb,
    body: bodyArb(inProcess),
  });
}

// --- the model -----------------------------------------------------------------------------------

type Expected =
  | { status: number; code: number; allow?: boolean }
  | { status: 200; sse: 'response'; ids: RequestId[] }
  | { status: 200; sse: 'initialized'; id: RequestId }
  | { status: 200; sse: 'replay'; from: number }
  | { status: 200; sse: 'open'; token: string }
  | { status: 202 }
  /** A resume from the last event of a finished stream: nothing left. */
  | { status: 204 }
  | { status: 200; deleted: true }
  /** Next.js answers methods a route does not export itself, without a JSON-RPC body. */
  | { status: number; bare: true };

/** What the SDK recognises as a message (`Protocol` drops the rest), plus the kit's two stricter rules. */
function classify(value: unknown): 'request' | 'notification' | 'response' | 'invalid' {
  const method = (value as { method?: unknown } | null)?.method;
  if (isJSONRPCRequest(value)) return method === '' ? 'invalid' : 'request';
  if (isJSONRPCNotification(value)) return method === '' ? 'invalid' : 'notification';
  // A response must name the request it answers.
  if (isJSONRPCResultResponse(value) || isJSONRPCErrorResponse(value))
    return (value as { id?: unknown }).id === undefined ? 'invalid' : 'response';
  return 'invalid';
}

/** A `Host` value of the form `name[:port]` (letters, digits, `-._~`, or an IPv6 literal; a port from 1 to 65535). */
function isHostPort(value: string): boolean {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9\-._~]+)(?::([0-9]{1,5}))?$/i.exec(value.replace('PORT', '1'));
  return m !== null && (m[2] === undefined || (Number(m[2]) >= 1 && Number(m[2]) <= 65_535));
}

function expected(c: Case, world: World, adapter: string): Expected {
  const post = c.method === 'POST';
  if (!['POST', 'GET', 'DELETE'].includes(c.method)) {
    if (adapter === 'next' && (c.method === 'PUT' || c.method === 'PATCH')) return { status: 405, bare: true };
    if (adapter === 'next' && c.method === 'OPTIONS') return { status: 204, bare: true };
    return { status: 405, code: -32000, allow: true };
  }
  // RFC 9112 §3.2: a Host that is no host[:port] is 400 before anything else looks at it.
  if (c.host.label !== 'ok' && !isHostPort(c.host.value)) return { status: 400, code: -32000 };
  if (c.host.label !== 'ok' || c.origin.label === 'foreign') return { status: 403, code: -32000 };
  const [, acceptPost, acceptGet] = c.accept;
  const versionOk = c.version === undefined || (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(c.version);
  const lookup = (): Expected | undefined => {
    if (c.session === 'none' || c.session === 'empty') return { status: 400, code: -32000 };
    if (c.session !== 'A') return { status: 404, code: -32001 };
    if (!versionOk) return { status: 400, code: -32000 };
    return undefined;
  };
  if (post) {
    if (!acceptPost) return { status: 406, code: -32000 };
    if (c.contentType.label !== 'ok') return { status: 415, code: -32000 };
    if (Buffer.byteLength(c.body.text) > MAX_BODY) return { status: 413, code: -32600 };
    if (c.body.kind === 'parse') return { status: 400, code: -32700 };
    const value = c.body.value;
    const isInitialize =
      typeof value === 'object' && value !== null && !Array.isArray(value) && (value as { method?: unknown }).method === 'initialize';
    if (isInitialize) {
      if (classify(value) !== 'request') return { status: 400, code: -32600 };
      if (c.session !== 'none') return { status: 400, code: -32600 };
      return { status: 200, sse: 'initialized', id: (value as { id: RequestId }).id };
    }
    const refused = lookup();
    if (refused) return refused;
    // A negotiated 2025-11-25: no batches.
    if (Array.isArray(value)) return { status: 400, code: -32600 };
    const kind = classify(value);
    if (kind === 'invalid') return { status: 400, code: -32600 };
    if (kind === 'request') return { status: 200, sse: 'response', ids: [(value as { id: RequestId }).id] };
    return { status: 202 };
  }
  if (c.method === 'GET') {
    if (!acceptGet) return { status: 406, code: -32000 };
    const refused = lookup();
    if (refused) return refused;
    switch (c.cursor.label) {
      case 'none':
      case 'empty':
      case 'a-standalone':
        return { status: 200, sse: 'open', token: world.aStandalone };
      case 'a-done':
        return c.cursor.value >= world.aDone.frames.length ? { status: 204 } : { status: 200, sse: 'replay', from: c.cursor.value };
      case 'malformed':
      case 'leading-zero':
      case 'duplicate':
      case 'huge-seq':
        return { status: 400, code: -32600 };
      default:
        return { status: 404, code: -32000 };
    }
  }
  const refused = lookup();
  if (refused) return refused;
  return { status: 200, deleted: true };
}

// --- running a case ------------------------------------------------------------------------------

function headersOf(c: Case, world: World): Record<string, string | string[]> {
  const fill = (v: string) => v.replace('PORT', String(world.port));
  const h: Record<string, string | string[]> = { host: fill(c.host.value) };
  if (c.origin.value !== undefined) h.origin = fill(c.origin.value);
  if (c.accept[0] !== undefined) h.accept = c.accept[0];
  if (c.contentType.value !== undefined) h['content-type'] = c.contentType.value;
  if (c.version !== undefined) h['mcp-protocol-version'] = c.version;
  const session = {
    A: world.a.sessionId,
    none: undefined,
    empty: '',
    unknown: 'AAAAAAAAAAAAAAAAAAAAAA',
    duplicate: [world.a.sessionId, world.a.sessionId],
    garbage: 'x~../../etc/passwd',
  }[c.session];
  if (session !== undefined) h['mcp-session-id'] = session;
  const b = world.forbidden.find((f) => /^[A-Za-z0-9_-]{22}$/.test(f) && f !== world.b.sessionId)!;
  const cursor: string | string[] | undefined = {
    none: undefined,
    empty: '',
    'a-done': `${world.aDone.token}.${c.cursor.value}`,
    'a-past': `${world.aDone.token}.${c.cursor.value}`,
    'a-standalone': `${world.aStandalone}.0`,
    b: `${b}.${c.cursor.value}`,
    guess: `${c.cursor.token}.${c.cursor.value}`,
    malformed: 'not-an-event-id',
    'leading-zero': `${world.aDone.token}.01`,
    duplicate: [`${world.aDone.token}.1`, `${world.aDone.token}.2`],
    'huge-seq': `${world.aDone.token}.${'9'.repeat(16)}`,
  }[c.cursor.label];
  if (c.method === 'GET' && cursor !== undefined) h['last-event-id'] = cursor;
  return h;
}

async function runCase(c: Case, world: World, adapter: string): Promise<void> {
  const want = expected(c, world, adapter);
  const headers = headersOf(c, world);
  const body = ['POST', 'PUT', 'PATCH'].includes(c.method) ? c.body.text : undefined;
  const res = await RawSse.open(world.url, { method: c.method, headers, body }, { agent });
  const where = () =>
    `case ${JSON.stringify({ ...c, body: c.body.text.slice(0, 300) })}\nexpected ${JSON.stringify(want)}\ngot ${res.status} ${JSON.stringify(res.headers)}\n${res.raw.slice(0, 1500)}`;
  try {
    if ('sse' in want && want.sse === 'open') {
      // A live stream never ends by itself: take its priming event, then leave.
      const priming = await res.next(10_000);
      expect(priming.data, where()).toBe('');
      expect(splitId(priming.id!).token, where()).toBe(want.token);
      res.abort();
    } else {
      const how = await res.end(15_000);
      expect(how, where()).toBe('server');
    }
  } catch (error) {
    res.abort();
    throw new Error(`${(error as Error).message}\n${where()}`);
  }
  const text = res.raw;
  expect(res.status, where()).toBe(want.status);
  for (const secret of world.forbidden)
    if (text.includes(secret)) throw new Error(`another session's data (${secret}) in the answer\n${where()}`);

  if ('bare' in want || ('sse' in want && want.sse === 'open')) return;
  if ('code' in want) {
    if (c.method === 'HEAD') {
      expect(text, where()).toBe('');
    } else {
      expect(res.headers['content-type'], where()).toMatch(/^application\/json/);
      const parsed = JSON.parse(text);
      expect(parsed, where()).toMatchObject({ jsonrpc: '2.0', error: { code: want.code, message: expect.any(String) } });
      // Both schemas (2025-11-25, 2026-07-28) make `id` optional on an error and never null.
      expect(parsed, where()).not.toHaveProperty('id');
    }
    if (want.allow) expect(res.headers.allow, where()).toBe('GET, POST, DELETE');
    return;
  }
  if (want.status === 202 || want.status === 204) {
    expect(text, where()).toBe('');
    return;
  }
  if ('deleted' in want) {
    world.deletedA++;
    Object.assign(world, await openA(world));
    return;
  }
  expect(res.headers['content-type'], where()).toBe('text/event-stream');
  expect(res.partial, where()).toBe('');
  const priming = res.blocks[0]!;
  expect(priming.data, where()).toBe('');
  const token = splitId(priming.id!).token;
  const messages = res.blocks.slice(1).filter((b) => b.data !== undefined);
  for (const m of messages) expect(splitId(m.id!).token, where()).toBe(token);
  if (want.sse === 'replay') {
    expect(priming.id, where()).toBe(`${world.aDone.token}.${want.from}`);
    expect(
      messages.map((m) => m.raw),
      where(),
    ).toEqual(world.aDone.frames.slice(want.from));
    return;
  }
  const answers = messages.map((m) => JSON.parse(m.data!)).filter((m) => !('method' in m));
  if (want.sse === 'initialized') {
    const sessionId = res.headers['mcp-session-id'] as string;
    expect(sessionId, where()).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(
      answers.map((m) => m.id),
      where(),
    ).toEqual([want.id]);
    world.created++;
    const del = await new RawSession(world.url, sessionId).del();
    expect(del.status, where()).toBe(200);
    return;
  }
  expect(token === world.aDone.token || token === world.aStandalone, where()).toBe(false);
  expect(
    answers.map((m) => m.id),
    where(),
  ).toEqual(want.ids);
  for (const a of answers) {
    const content = a.result?.content?.[0]?.text;
    if (typeof content === 'string' && content.startsWith('session:')) expect(content, where()).toBe(`session:${world.a.sessionId}`);
  }
}

describe.each(adapters)('fuzz: $name', (adapter) => {
  let sut: ServerUnderTest;
  let world: World;
  const servers = new ServerCounter();

  beforeAll(async () => {
    sut = await adapter.start(
      adapter.inProcess
        ? {
            maxBodyBytes: MAX_BODY,
            maxSessions: 1_000_000,
            server: servers.factory((server, sessionId) => (registerWhoami(server, sessionId), registerRemember(server))),
          }
        : { maxBodyBytes: MAX_BODY, maxSessions: 1_000_000 },
    );
    const port = Number(new URL(sut.url).port);
    const base = { url: sut.url, port, inProcess: adapter.inProcess };
    world = { ...base, ...(await openA(base)), ...(await openB(base)), deletedA: 0, created: 0 };
  });
  afterAll(async () => {
    await sut?.close();
  });

  it(
    `${RUNS} random requests: always the predicted 2xx or 4xx with the right JSON-RPC error; never a 5xx, a hang, or another session's data`,
    async () => {
      const seed = seedFor(`fuzz ${adapter.name}`);
      const started = performance.now();
      let cases = 0;
      await fc.assert(
        fc.asyncProperty(caseArb(adapter.inProcess), async (c) => {
          cases++;
          await runCase(c, world, adapter.name);
        }),
        {
          numRuns: RUNS,
          seed: seed | 0,
          endOnFailure: !LONG,
          interruptAfterTimeLimit: LONG ? 3_000_000 : 120_000,
          markInterruptAsFailure: true,
        },
      );
      console.log(
        `[fuzz ${adapter.name}] ${cases} cases in ${Math.round(performance.now() - started)} ms; sessions created ${world.created}, A deleted ${world.deletedA} times`,
      );

      // The victim is intact and still served, and nothing piled up.
      const b = await world.b.postSse(callTool(99, 'test_simple_text'));
      expect(await b.end()).toBe('server');
      expect(b.messages.at(-1)!.message.id).toBe(99);
      expect(sut.errors).toEqual([]);
      if (adapter.inProcess) expect(sut.inProcess!.handler.sessionCount).toBe(2);
    },
    LONG ? 3_600_000 : 150_000,
  );
});
