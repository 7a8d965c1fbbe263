/**
 * The one SSE parser of the testbed, for every client that reads a stream byte by byte: an event
 * (a block) counts once its blank line has arrived, as for an EventSource (WHATWG HTML, "Parsing
 * an event stream"), and a block keeps its exact text so a test can assert on the bytes. Line
 * ends are `\n`, as mcp-kit writes them.
 */

export interface SseBlock {
  id?: string;
  data?: string;
  retry?: number;
  comment?: string;
  /** The block exactly as it came off the wire, without the blank line that ended it. */
  raw: string;
}

/** The fields of one block (its text without the blank line that ended it). */
export function parseBlock(raw: string): SseBlock {
  const block: SseBlock = { raw };
  for (const line of raw.split('\n')) {
    if (line.startsWith(':')) {
      block.comment = line.slice(1).trim();
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') block.id = value;
    else if (field === 'data') block.data = block.data === undefined ? value : `${block.data}\n${value}`;
    else if (field === 'retry') block.retry = Number(value);
  }
  return block;
}

/**
 * Cuts text into blocks as it arrives: `push` returns the text of each block its chunk completed
 * and keeps the rest for the next. Works on any string encoding of the bytes (a reader that may be
 * cut inside a character pushes latin1 and decodes each complete block).
 */
export class SseSplitter {
  private pending = '';

  push(chunk: string): string[] {
    this.pending += chunk;
    const complete: string[] = [];
    let at: number;
    while ((at = this.pending.indexOf('\n\n')) !== -1) {
      complete.push(this.pending.slice(0, at));
      this.pending = this.pending.slice(at + 2);
    }
    return complete;
  }

  /** The start of a block whose blank line has not arrived (what a cut left half-written). */
  get rest(): string {
    return this.pending;
  }
}

/** The complete blocks of a whole body's text (an unfinished last block is not one). */
export function parseSse(text: string): SseBlock[] {
  return new SseSplitter().push(text).map(parseBlock);
}

/** Reads a fetch body block by block, each as soon as its blank line has arrived. */
export async function* sseBlocks(body: ReadableStream<Uint8Array>): AsyncGenerator<SseBlock> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const splitter = new SseSplitter();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const raw of splitter.push(decoder.decode(value, { stream: true }))) yield parseBlock(raw);
    }
  } finally {
    reader.releaseLock();
  }
}

/** Every block of a body, once it has ended. */
export async function readSse(body: ReadableStream<Uint8Array>): Promise<SseBlock[]> {
  const blocks: SseBlock[] = [];
  for await (const block of sseBlocks(body)) blocks.push(block);
  return blocks;
}

/** The JSON-RPC messages the blocks carry, parsed (a priming event's empty data carries none). */
export function messagesOf(blocks: readonly SseBlock[]): any[] {
  return blocks.filter((b) => b.data !== undefined && b.data !== '').map((b) => JSON.parse(b.data!));
}
