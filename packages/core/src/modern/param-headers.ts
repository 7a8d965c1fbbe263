import type { Rejection } from '../http/errors.js';
import type { HeaderMap } from '../ports/http.js';
import { decodeHeaderValue, ModernErrorCode } from './envelope.js';

/** One `x-mcp-header` in a tool's input schema: argument `path` travels as `Mcp-Param-<name>` too (SEP-2243). */
export interface ParamHeader {
  name: string;
  path: string[];
  type: string | undefined;
}

/**
 * The `x-mcp-header` declarations of a tool's input schema: on primitive properties reached
 * through `properties` keys only, as the revision permits them.
 */
export function paramHeadersOf(schema: unknown, path: string[] = []): ParamHeader[] {
  const properties = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  if (typeof properties !== 'object' || properties === null) return [];
  const found: ParamHeader[] = [];
  for (const [key, property] of Object.entries(properties)) {
    const p = property as { 'x-mcp-header'?: unknown; type?: unknown } | null;
    if (typeof p !== 'object' || p === null) continue;
    const name = p['x-mcp-header'];
    if (typeof name === 'string' && name !== '')
      found.push({ name: name.toLowerCase(), path: [...path, key], type: typeof p.type === 'string' ? p.type : undefined });
    found.push(...paramHeadersOf(p, [...path, key]));
  }
  return found;
}

/**
 * A value the body carries for a declared parameter must come in its `Mcp-Param-*` header too,
 * equal once decoded (numbers compare as numbers); -32020 otherwise. An absent body value
 * expects no header.
 */
export function checkParamHeaders(declared: ParamHeader[], args: unknown, headers: HeaderMap): Rejection | undefined {
  for (const decl of declared) {
    let value: unknown = args;
    for (const key of decl.path) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
    if (value === undefined || value === null) continue;
    const body = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
    if (body === undefined) continue;
    const headerName = `mcp-param-${decl.name}`;
    const raw = headers[headerName];
    const sent = Array.isArray(raw) ? raw.join(', ') : raw;
    if (sent === undefined) return mismatch(`the body carries ${decl.path.join('.')} but the ${headerName} header is absent`);
    const decoded = decodeHeaderValue(sent.trim());
    if (decoded === undefined) return mismatch(`the ${headerName} header carries an invalid base64 value`);
    const numeric = (decl.type === 'integer' || decl.type === 'number') && typeof value === 'number' && /^-?\d+(\.\d+)?$/.test(decoded);
    if (numeric ? Number(decoded) !== value : decoded !== body) {
      return mismatch(
        `the ${headerName} header decodes to ${JSON.stringify(decoded)} but the body carries ${decl.path.join('.')}=${JSON.stringify(value)}`,
      );
    }
  }
  return undefined;
}

function mismatch(message: string): Rejection {
  return { ok: false, status: 400, code: ModernErrorCode.HeaderMismatch, message: `Header mismatch: ${message}` };
}
