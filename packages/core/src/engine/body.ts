import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import type { CoreRequest } from '../ports/http.js';

/** The request's JSON body: what a framework's parser left, or read here up to `maxBodyBytes`. */
export async function readJson(req: CoreRequest, maxBodyBytes: number): Promise<{ ok: true; body: unknown; text?: string } | Rejection> {
  let text: string;
  if (req.hasParsedBody) {
    // A body parser ran before us. Buffers and strings come from raw/text parsers: parse them.
    const parsed = req.parsedBody;
    if (typeof parsed === 'string') text = parsed;
    else if (parsed instanceof Uint8Array) text = new TextDecoder().decode(parsed);
    else return { ok: true, body: parsed };
  } else {
    const read = await req.readBody(maxBodyBytes);
    if (!read.ok) {
      return read.tooLarge
        ? reject(413, ErrorCode.InvalidRequest, `Payload Too Large: the body exceeds ${maxBodyBytes} bytes (maxBodyBytes)`)
        : reject(400, ErrorCode.InvalidRequest, `Bad Request: could not read the body: ${read.error.message}`);
    }
    text = read.text;
  }
  try {
    // The text goes along: a request forwarded to another instance is relayed as it came.
    return { ok: true, body: JSON.parse(text), text };
  } catch (error) {
    return reject(400, ErrorCode.ParseError, `Parse error: ${(error as Error).message}`);
  }
}
