import type { Rejection } from '../http/errors.js';
import type { HeaderMap } from '../ports/http.js';

/**
 * The 2026-07-28 revision's per-request rules, as pure functions: the `_meta` envelope every
 * request carries instead of a session, and the routing headers that must agree with the body
 * (SEP-2575, SEP-2243). Each returns the revision's error, never throws.
 */

export const PROTOCOL_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo';
export const CLIENT_CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
export const LOG_LEVEL_KEY = 'io.modelcontextprotocol/logLevel';
export const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo';
export const SUBSCRIPTION_ID_KEY = 'io.modelcontextprotocol/subscriptionId';

/** The revisions this engine serves per request (the "modern" era). */
export const MODERN_VERSIONS: readonly string[] = ['2026-07-28'];

/** The revision's error codes (schema.ts of 2026-07-28). */
export const ModernErrorCode = {
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
  InvalidParams: -32602,
  MethodNotFound: -32601,
  InvalidRequest: -32600,
} as const;

export const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a 2026 request says about its client, read once from its `_meta`. */
export interface Envelope {
  protocolVersion: string;
  clientCapabilities: Record<string, unknown>;
  clientInfo: { name: string; version: string; [key: string]: unknown } | undefined;
  logLevel: LogLevel | undefined;
}

function refuse(status: number, code: number, message: string, data?: unknown): Rejection {
  return data === undefined ? { ok: false, status, code, message } : { ok: false, status, code, message, data };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether a message claims the 2026 era: its `params._meta` names a protocol version (SEP-2575). */
export function claimsModern(message: unknown): boolean {
  if (!isObject(message)) return false;
  const params = message.params;
  return isObject(params) && isObject(params._meta) && PROTOCOL_VERSION_KEY in params._meta;
}

/** Reads and checks the envelope: a missing or malformed required field is -32602 with 400. */
export function readEnvelope(params: Record<string, unknown>): Envelope | Rejection {
  const meta = params._meta as Record<string, unknown>;
  const invalid = (key: string, problem: string) =>
    refuse(400, ModernErrorCode.InvalidParams, `Invalid _meta envelope: ${key} ${problem}`, { envelope: { key, problem } });
  const version = meta[PROTOCOL_VERSION_KEY];
  if (typeof version !== 'string' || version === '') return invalid(PROTOCOL_VERSION_KEY, 'must be a non-empty string');
  const capabilities = meta[CLIENT_CAPABILITIES_KEY];
  if (capabilities === undefined) return invalid(CLIENT_CAPABILITIES_KEY, 'is missing (send {} for none)');
  if (!isObject(capabilities)) return invalid(CLIENT_CAPABILITIES_KEY, 'must be an object');
  const problem = capabilitiesProblem(capabilities);
  if (problem) return invalid(CLIENT_CAPABILITIES_KEY, problem);
  const info = meta[CLIENT_INFO_KEY];
  if (info !== undefined && !(isObject(info) && typeof info.name === 'string' && typeof info.version === 'string')) {
    return invalid(CLIENT_INFO_KEY, 'must be an object with a string name and version');
  }
  const infoProblem = info === undefined ? undefined : clientInfoProblem(info as Record<string, unknown>);
  if (infoProblem) return invalid(CLIENT_INFO_KEY, infoProblem);
  const level = meta[LOG_LEVEL_KEY];
  if (level !== undefined && !(LOG_LEVELS as readonly unknown[]).includes(level)) {
    return invalid(LOG_LEVEL_KEY, `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  return {
    protocolVersion: version,
    clientCapabilities: capabilities,
    clientInfo: info as Envelope['clientInfo'],
    logLevel: level as LogLevel | undefined,
  };
}

/** The capabilities the schema types: each an object; `experimental` and `extensions` records of objects. */
function capabilitiesProblem(capabilities: Record<string, unknown>): string | undefined {
  for (const [name, value] of Object.entries(capabilities)) {
    if (!['elicitation', 'sampling', 'roots', 'experimental', 'extensions', 'tasks'].includes(name)) continue;
    if (!isObject(value)) return `member ${JSON.stringify(name)} must be an object`;
    if (name !== 'experimental' && name !== 'extensions') continue;
    for (const [key, inner] of Object.entries(value)) if (!isObject(inner)) return `${name}[${JSON.stringify(key)}] must be an object`;
  }
  return undefined;
}

/** The optional members of `Implementation` the schema types. */
function clientInfoProblem(info: Record<string, unknown>): string | undefined {
  for (const name of ['title', 'description', 'websiteUrl']) {
    if (info[name] !== undefined && typeof info[name] !== 'string') return `member ${JSON.stringify(name)} must be a string`;
  }
  if (info.icons !== undefined && !Array.isArray(info.icons)) return 'member "icons" must be an array';
  return undefined;
}

/** A version this engine does not serve per request: -32022 with what it does serve. */
export function checkModernVersion(version: string): Rejection | undefined {
  if (MODERN_VERSIONS.includes(version)) return undefined;
  return refuse(400, ModernErrorCode.UnsupportedProtocolVersion, `Unsupported protocol version: ${version}`, {
    supported: [...MODERN_VERSIONS],
    requested: version,
  });
}

/** Methods whose `Mcp-Name` header carries a body field (SEP-2243; tasks from SEP-2663). */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/**
 * The routing headers must say what the body says: `MCP-Protocol-Version`, `Mcp-Method`, and for
 * the methods above `Mcp-Name`. Values compare exactly (header names are case-insensitive, which
 * the bridges' lower-cased maps give); surrounding whitespace is HTTP's, not the value's.
 */
export function checkRoutingHeaders(
  headers: HeaderMap,
  method: string,
  params: Record<string, unknown>,
  version: string,
): Rejection | undefined {
  const versionHeader = single(headers['mcp-protocol-version']);
  if (versionHeader === undefined) return mismatch('MCP-Protocol-Version header is required on every request');
  if (versionHeader !== version)
    return mismatch(`MCP-Protocol-Version header ${quote(versionHeader)} does not match the body's ${quote(version)}`);
  const methodHeader = single(headers['mcp-method']);
  if (methodHeader === undefined) return mismatch('Mcp-Method header is required on every request');
  if (methodHeader !== method)
    return mismatch(`Mcp-Method header ${quote(methodHeader)} does not match the body's method ${quote(method)}`);
  const field = NAME_FIELD[method];
  if (field === undefined) return undefined;
  const raw = single(headers['mcp-name']);
  const body = params[field];
  if (raw === undefined) return mismatch(`Mcp-Name header is required for ${method} (the body's params.${field})`);
  const name = decodeHeaderValue(raw);
  if (name === undefined) return mismatch(`Mcp-Name header ${quote(raw)} carries an invalid base64 value`);
  if (name !== body) return mismatch(`Mcp-Name header ${quote(raw)} does not match the body's params.${field} ${quote(String(body))}`);
  return undefined;
}

function mismatch(message: string): Rejection {
  return refuse(400, ModernErrorCode.HeaderMismatch, `Header mismatch: ${message}`);
}

function single(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value.join(', ') : value;
  return v === undefined ? undefined : v.trim();
}

function quote(value: string): string {
  return JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value);
}

/**
 * SEP-2243: a value that is not header-safe travels as `=?base64?<utf-8 as base64>?=`. `undefined`
 * for a sentinel whose payload is not canonical base64 of UTF-8 (the revision says to reject it).
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!value.startsWith('=?base64?') || !value.endsWith('?=')) return value;
  const b64 = value.slice('=?base64?'.length, -2);
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(b64)) return undefined;
  try {
    // atob and TextDecoder, not Buffer: the web bridge runs where Node's globals do not.
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
}
