import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
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
      return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: JSON-RPC batches are not supported by this protocol version (2025-06-18 and later); send one message per POST');
    }
    if (list.length === 0) return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: empty batch');
  }
  const requestIds: RequestId[] = [];
  let initialize: JSONRPCMessage | undefined;
  for (let i = 0; i < list.length; i++) {
    const m = list[i];
    const where = batch ? ` (batch item ${i})` : '';
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
    if ('method' in msg) {
      if (typeof msg.method !== 'string' || msg.method.length === 0) {
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "method" must be a non-empty string`);
      }
      if ('params' in msg && (msg.params === null || typeof msg.params !== 'object')) {
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "params" must be an object or array`);
      }
      if (hasId) {
        requestIds.push(id as RequestId);
        if (msg.method === 'initialize') initialize = msg as unknown as JSONRPCMessage;
      }
    } else if (hasId && ('result' in msg || 'error' in msg)) {
      if ('error' in msg && (msg.error === null || typeof msg.error !== 'object')) {
        return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: "error" must be an object`);
      }
    } else {
      return reject(400, ErrorCode.InvalidRequest, `Invalid Request${where}: not a request, notification or response`);
    }
  }
  if (initialize && batch) {
    return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must be sent alone, not in a batch');
  }
  if (new Set(requestIds).size !== requestIds.length) {
    return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: duplicate request ids in one batch');
  }
  return { ok: true, messages: list as JSONRPCMessage[], batch, requestIds, initialize };
}

function isRequestId(id: unknown): boolean {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));
}

/** Protocol versions that still allow JSON-RPC batches. */
export function allowsBatches(protocolVersion: string): boolean {
  return protocolVersion < '2025-06-18';
}
