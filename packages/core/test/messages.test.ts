import { describe, expect, it } from 'vitest';
import { ErrorCode, parseMessages } from '@mcp-kit/core/internal';
import { allowsBatches } from '../src/http/messages.js';

const request = (id: string | number, method = 'tools/call', params: unknown = { name: 'x' }) => ({ jsonrpc: '2.0', id, method, params });
const notification = (method = 'notifications/initialized') => ({ jsonrpc: '2.0', method });
const initialize = (id: string | number = 0) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
});

/** Asserts a 400 / -32600 rejection with exactly this message. */
function expectInvalid(body: unknown, allowBatch: boolean, message: string): void {
  expect(parseMessages(body, allowBatch)).toEqual({ ok: false, status: 400, code: ErrorCode.InvalidRequest, message });
}

describe('parseMessages: accepted shapes', () => {
  it('a request', () => {
    const msg = request(7);
    expect(parseMessages(msg, false)).toEqual({ ok: true, messages: [msg], batch: false, requestIds: [7], initialize: undefined });
  });

  it('a request with a string id, no params, or empty params', () => {
    const a = { jsonrpc: '2.0', id: 'abc', method: 'ping' };
    expect(parseMessages(a, false)).toMatchObject({ ok: true, requestIds: ['abc'] });
    const c = { jsonrpc: '2.0', id: 0, method: 'x', params: {} };
    expect(parseMessages(c, false)).toMatchObject({ ok: true, requestIds: [0] });
  });

  it('a notification carries no request id', () => {
    const msg = notification();
    expect(parseMessages(msg, false)).toEqual({ ok: true, messages: [msg], batch: false, requestIds: [], initialize: undefined });
  });

  it('a response (result or error) carries no request id', () => {
    const result = { jsonrpc: '2.0', id: 5, result: { ok: 1 } };
    expect(parseMessages(result, false)).toEqual({ ok: true, messages: [result], batch: false, requestIds: [], initialize: undefined });
    const error = { jsonrpc: '2.0', id: 'r1', error: { code: -1, message: 'no' } };
    expect(parseMessages(error, false)).toEqual({ ok: true, messages: [error], batch: false, requestIds: [], initialize: undefined });
  });

  it('initialize is reported', () => {
    const msg = initialize(1);
    expect(parseMessages(msg, false)).toEqual({ ok: true, messages: [msg], batch: false, requestIds: [1], initialize: msg });
  });

  it('a mixed batch when batches are allowed, request ids in order', () => {
    const body = [request(1), notification(), { jsonrpc: '2.0', id: 9, result: {} }, request('two')];
    expect(parseMessages(body, true)).toEqual({ ok: true, messages: body, batch: true, requestIds: [1, 'two'], initialize: undefined });
  });

  it('a request and a response may share an id (only request ids must be unique)', () => {
    const body = [request(1), { jsonrpc: '2.0', id: 1, result: {} }];
    expect(parseMessages(body, true)).toMatchObject({ ok: true, requestIds: [1] });
  });

  it('1 and "1" are different ids', () => {
    expect(parseMessages([request(1), request('1')], true)).toMatchObject({ ok: true, requestIds: [1, '1'] });
  });
});

describe('parseMessages: rejections (400, -32600)', () => {
  it('a batch when batches are not allowed', () => {
    expectInvalid(
      [request(1)],
      false,
      'Invalid Request: JSON-RPC batches are not supported by this protocol version (2025-06-18 and later); send one message per POST',
    );
    // Also an empty one: the batch itself is what is refused.
    expect(parseMessages([], false)).toMatchObject({
      ok: false,
      status: 400,
      code: -32600,
      message: expect.stringContaining('batches are not supported'),
    });
  });

  it('an empty batch', () => {
    expectInvalid([], true, 'Invalid Request: empty batch');
  });

  it('a body that is not an object', () => {
    for (const body of [null, 42, 'hello', true, undefined]) {
      expectInvalid(body, false, 'Invalid Request: expected a JSON-RPC 2.0 object');
    }
  });

  it('a batch item that is not an object, naming its index', () => {
    expectInvalid([request(1), 'x'], true, 'Invalid Request (batch index 1): expected a JSON-RPC 2.0 object');
    expectInvalid([[request(1)]], true, 'Invalid Request (batch index 0): expected a JSON-RPC 2.0 object');
    expectInvalid([request(1), notification(), null], true, 'Invalid Request (batch index 2): expected a JSON-RPC 2.0 object');
  });

  it('a missing or wrong jsonrpc version', () => {
    for (const jsonrpc of [undefined, '1.0', 2, '2']) {
      expectInvalid({ jsonrpc, id: 1, method: 'x' }, false, 'Invalid Request: "jsonrpc" must be "2.0"');
    }
    expectInvalid({ id: 1, method: 'x' }, false, 'Invalid Request: "jsonrpc" must be "2.0"');
    expectInvalid([request(1), { jsonrpc: '1.0', method: 'x' }], true, 'Invalid Request (batch index 1): "jsonrpc" must be "2.0"');
  });

  it('an id that is not a string or an integer (float, object, null, boolean, array, unsafe integer)', () => {
    for (const id of [1.5, {}, { a: 1 }, null, true, [1], 2 ** 53, Number.NaN]) {
      expectInvalid({ jsonrpc: '2.0', id, method: 'x' }, false, 'Invalid Request: "id" must be a string or an integer');
    }
    // Responses too.
    expectInvalid({ jsonrpc: '2.0', id: 0.5, result: {} }, false, 'Invalid Request: "id" must be a string or an integer');
    expectInvalid(
      { jsonrpc: '2.0', id: null, error: { code: -1, message: 'x' } },
      false,
      'Invalid Request: "id" must be a string or an integer',
    );
  });

  it('a method that is not a non-empty string', () => {
    for (const method of ['', 1, null, {}]) {
      expectInvalid({ jsonrpc: '2.0', id: 1, method }, false, 'Invalid Request: "method" must be a non-empty string');
    }
    expectInvalid({ jsonrpc: '2.0', method: '' }, false, 'Invalid Request: "method" must be a non-empty string');
  });

  it('params that are not an object (MCP has no positional params; the SDK would drop the message unanswered)', () => {
    for (const params of [null, 'x', 3, true, [], [1, 2]]) {
      expectInvalid({ jsonrpc: '2.0', id: 1, method: 'x', params }, false, 'Invalid Request: "params" must be an object');
      expectInvalid({ jsonrpc: '2.0', method: 'x', params }, false, 'Invalid Request: "params" must be an object');
    }
  });

  it('members the SDK does not allow, and _meta fields it cannot read', () => {
    expectInvalid({ jsonrpc: '2.0', id: 1, method: 'x', extra: 1 }, false, 'Invalid Request: unexpected member "extra"');
    expectInvalid({ jsonrpc: '2.0', id: 1, method: 'x', result: {} }, false, 'Invalid Request: unexpected member "result"');
    expectInvalid({ jsonrpc: '2.0', method: 'x', id2: 1 }, false, 'Invalid Request: unexpected member "id2"');
    expectInvalid({ jsonrpc: '2.0', id: 1, result: {}, params: {} }, false, 'Invalid Request: unexpected member "params"');
    for (const _meta of [null, 5, []])
      expectInvalid({ jsonrpc: '2.0', id: 1, method: 'x', params: { _meta } }, false, 'Invalid Request: "params._meta" must be an object');
    for (const progressToken of [1.5, true, null, {}]) {
      expectInvalid(
        { jsonrpc: '2.0', id: 1, method: 'x', params: { _meta: { progressToken } } },
        false,
        'Invalid Request: "params._meta.progressToken" must be a string or an integer',
      );
    }
    expectInvalid(
      { jsonrpc: '2.0', id: 1, method: 'x', params: { _meta: { 'io.modelcontextprotocol/related-task': { taskId: 5 } } } },
      false,
      'Invalid Request: "params._meta.io.modelcontextprotocol/related-task" must be an object with a string "taskId"',
    );
    expect(
      parseMessages({ jsonrpc: '2.0', id: 1, method: 'x', params: { _meta: { progressToken: 'p', other: [1] }, a: 1 } }, false),
    ).toMatchObject({ ok: true });
  });

  it('a response whose result is not an object, or with both result and error', () => {
    for (const result of [null, [], 'ok', 1])
      expectInvalid({ jsonrpc: '2.0', id: 1, result }, false, 'Invalid Request: "result" must be an object');
    expectInvalid(
      { jsonrpc: '2.0', id: 1, result: {}, error: { code: 1, message: 'x' } },
      false,
      'Invalid Request: a response has "result" or "error", not both',
    );
  });

  it('an error response whose error is not an object with an integer code and a string message', () => {
    for (const error of [null, 'boom', 42, [], {}, { code: 1.5, message: 'x' }, { code: 1 }, { message: 'x' }, { code: 1, message: 2 }]) {
      expectInvalid(
        { jsonrpc: '2.0', id: 1, error },
        false,
        'Invalid Request: "error" must be an object with an integer "code" and a string "message"',
      );
    }
  });

  it('something that is neither request, notification nor response', () => {
    const msg = 'Invalid Request: not a request, notification or response';
    expectInvalid({ jsonrpc: '2.0' }, false, msg);
    expectInvalid({ jsonrpc: '2.0', id: 1 }, false, msg);
    // A result without an id is not a response.
    expectInvalid({ jsonrpc: '2.0', result: {} }, false, msg);
    expectInvalid({ jsonrpc: '2.0', error: { code: 1, message: 'x' } }, false, msg);
  });

  it('initialize inside a batch', () => {
    expectInvalid([initialize(1), notification()], true, 'Invalid Request: initialize must be sent alone, not in a batch');
    expectInvalid([request(1), initialize(2)], true, 'Invalid Request: initialize must be sent alone, not in a batch');
  });

  it('duplicate request ids in one batch', () => {
    expectInvalid([request(1), request(1)], true, 'Invalid Request: duplicate request ids in one batch');
    expectInvalid([request('a'), notification(), request('b'), request('a')], true, 'Invalid Request: duplicate request ids in one batch');
  });

  it('reports the first bad item of a batch', () => {
    expectInvalid(
      [request(1), { jsonrpc: '2.0', id: 1.5, method: 'x' }, { jsonrpc: '1.0' }],
      true,
      'Invalid Request (batch index 1): "id" must be a string or an integer',
    );
  });
});

describe('allowsBatches', () => {
  it('allows batches only before 2025-06-18', () => {
    expect(allowsBatches('2024-11-05')).toBe(true);
    expect(allowsBatches('2025-03-26')).toBe(true);
    expect(allowsBatches('2025-06-18')).toBe(false);
    expect(allowsBatches('2025-11-25')).toBe(false);
  });
});

describe('initialize in a batch', () => {
  it('rejects even a one-item batch', async () => {
    const { parseMessages } = await import('../src/http/messages.js');
    const r = parseMessages([{ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }], true);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(/initialize must be sent alone/);
  });
});
