import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import { ErrorCode, reject, type Rejection } from './errors.js';

export interface ParsedBody {
  ok: true;
  messages: JSONRPCMessage[];
  batch: boolean;
  /** ids of the requests among `messages`, in order. */
  requestIds: RequestId[];
  initialize: JSONRPCMessage | undefined;
}

/**
 * Checks the JSON-RPC shape of a POST body without a schema library: cheap on the hot path, and
 * the SDK validates params itself. Returns a 400 for anything that is not a message or batch.
 */
export function parseMessages(body: unknown, allowBatch: boolean): ParsedBody | Rejection {
  const batch = Array.isArray(body);
  const list: unknown[] = batch ? (body as unknown[]) : [body];
  if (batch) {
    if (!allowBatch) {
      return reject(
        400,
        ErrorCode.InvalidRequest,
        'Invalid Request: JSON-RPC batches are not supported by this protocol version (2025-06-18 and later); send one message per POST',
      );
    }
    if (list.length === 0) return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: empty batch');
  }
  const requestIds: RequestId[] = [];
  let initialize: JSONRPCMessage | undefined;
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    const where = batch ? ` (batch index ${i})` : '';
    if (m === null || typeof m !== 'object' || Array.isArray(m)) {
      return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: expected a JSON-RPC 2.0 object`);
    }
    const msg = m as Record<string, unknown>;
    if (msg.jsonrpc !== '2.0') return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "jsonrpc" must be "2.0"`);
    const hasId = 'id' in msg;
    const id = msg.id;
    if (hasId && !isRequestId(id)) {
      return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "id" must be a string or an integer`);
    }
    // The SDK drops a message that fails its strict schemas without answering: a request it drops
    // would leave its stream open forever. So refuse here whatever the SDK would not recognise.
    if ('method' in msg) {
      if (typeof msg.method !== 'string' || msg.method.length === 0) {
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "method" must be a non-empty string`);
      }
      const extra = unexpectedMember(msg, REQUEST_MEMBERS);
      if (extra !== undefined)
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: unexpected member ${JSON.stringify(extra)}`);
      if ('params' in msg) {
        const problem = paramsProblem(msg.params);
        if (problem) return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: ${problem}`);
      }
      if (hasId) {
        requestIds.push(id as RequestId);
        if (msg.method === 'initialize') initialize = msg as unknown as JSONRPCMessage;
      }
    } else if (hasId && ('result' in msg || 'error' in msg)) {
      if ('result' in msg && 'error' in msg)
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: a response has "result" or "error", not both`);
      const extra = unexpectedMember(msg, RESPONSE_MEMBERS);
      if (extra !== undefined)
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: unexpected member ${JSON.stringify(extra)}`);
      if ('result' in msg && !isPlainObject(msg.result)) {
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "result" must be an object`);
      }
      if ('error' in msg) {
        const error = msg.error as { code?: unknown; message?: unknown } | null;
        if (!isPlainObject(error) || !Number.isSafeInteger(error.code) || typeof error.message !== 'string') {
          return reject(
            400,
            ErrorCode.InvalidRequest,
            `Invalid Request${where}: "error" must be an object with an integer "code" and a string "message"`,
          );
        }
      }
    } else {
      return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: not a request, notification or response`);
    }
  }
  if (initialize && batch) {
    return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must be sent alone, not in a batch');
  }
  if (requestIds.length > 1 && new Set(requestIds).size !== requestIds.length) {
    return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: duplicate request ids in one batch');
  }
  return { ok: true, messages: list as JSONRPCMessage[], batch, requestIds, initialize };
}

const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params']);
const RESPONSE_MEMBERS = new Set(['jsonrpc', 'id', 'result', 'error']);
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

function unexpectedMember(msg: Record<string, unknown>, allowed: Set<string>): string | undefined {
  for (const key in msg) if (!allowed.has(key)) return key;
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** MCP params are an object; the SDK also checks the `_meta` fields it reads before it dispatches. */
function paramsProblem(params: unknown): string | undefined {
  if (!isPlainObject(params)) return '"params" must be an object';
  if (!('_meta' in params)) return undefined;
  const meta = params._meta;
  if (!isPlainObject(meta)) return '"params._meta" must be an object';
  if ('progressToken' in meta && typeof meta.progressToken !== 'string' && !Number.isSafeInteger(meta.progressToken)) {
    return '"params._meta.progressToken" must be a string or an integer';
  }
  if (
    RELATED_TASK in meta &&
    !(isPlainObject(meta[RELATED_TASK]) && typeof (meta[RELATED_TASK] as { taskId?: unknown }).taskId === 'string')
  ) {
    return `"params._meta.${RELATED_TASK}" must be an object with a string "taskId"`;
  }
  return undefined;
}

function isRequestId(id: unknown): boolean {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

/** Protocol versions that still allow JSON-RPC batches. */
export function allowsBatches(protocolVersion: string): boolean {
  return protocolVersion < '2025-06-18';
}

/** The id of a single message, when it has a valid one: an error answer about it may echo it. */
export function readableId(body: unknown): string | number | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const id = (body as { id?: unknown }).id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : undefined;
}
