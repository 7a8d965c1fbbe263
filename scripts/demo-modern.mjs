// The 2026-07-28 half of `npm run demo`: the same long_task, from a client of the 2026 revision,
// twice. Once declaring the Tasks extension: the tool's closeSSEStream turns the call into a task,
// and the client polls tasks/get at the task's pollIntervalMs. Once without it: the call stays on
// its one stream (the revision has no resumable streams, so there is nothing to close). Raw HTTP,
// so what is printed is what went over the wire.

const TASKS = 'io.modelcontextprotocol/tasks';
const VERSION = '2026-07-28';

function envelope(extensions) {
  return {
    'io.modelcontextprotocol/protocolVersion': VERSION,
    'io.modelcontextprotocol/clientInfo': { name: 'demo-2026', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': extensions ? { extensions } : {},
  };
}

async function post(url, id, method, params, extensions) {
  const body = { jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...params._meta, ...envelope(extensions) } } };
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': VERSION,
    'mcp-method': method,
  };
  if (method === 'tools/call') headers['mcp-name'] = params.name;
  if (method.startsWith('tasks/')) headers['mcp-name'] = params.taskId;
  return fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
}

/** Reads an SSE answer frame by frame, handing each message to `onMessage`; resolves with the last. */
async function readSse(res, onMessage) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let last;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let at;
    while ((at = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) onMessage((last = JSON.parse(data)));
    }
  }
  return last;
}

/**
 * Runs both 2026 calls against `url`; `out(tag, line)` prints, `paint` colours. Resolves with
 * whether each behaved: the task's result once, the stream's every step once and in order.
 */
export async function modernDemo(url, args, { out, paint, ms }) {
  const { bold, dim, green, red, yellow, cyan } = paint;
  const results = [];

  console.log();
  console.log(bold(`── call 3: the same long_task from a 2026-07-28 client that declares the Tasks extension ──`));
  console.log(dim('   no session, no initialize: each request carries the client in its _meta; the tool calls closeSSEStream as before'));
  const started = performance.now();
  // The progress token lets the tool report progress: a task shows the last report as its statusMessage.
  const created = await post(
    url,
    1,
    'tools/call',
    { name: 'long_task', arguments: args, _meta: { progressToken: 'demo-task' } },
    { [TASKS]: {} },
  );
  // JSON, or an SSE stream when the tool reported progress before it became a task.
  const answer = (created.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? await readSse(created, () => {})
    : await created.json();
  const task = answer.result;
  out('task', `${bold('→ POST')} tools/call long_task   ${bold('←')} ${created.status} ${cyan(`resultType: ${task?.resultType}`)}`);
  out(
    'task',
    `   taskId=…${String(task?.taskId).slice(-6)} status=${task?.status} pollIntervalMs=${task?.pollIntervalMs} ttlMs=${task?.ttlMs}`,
  );
  let final;
  let polls = 0;
  let previous = performance.now();
  for (let i = 2; task?.taskId && i < 500; i++) {
    await new Promise((r) => setTimeout(r, task.pollIntervalMs ?? 1000));
    const res = await post(url, i, 'tasks/get', { taskId: task.taskId }, { [TASKS]: {} });
    const got = (await res.json()).result;
    polls++;
    const waited = performance.now() - previous;
    previous = performance.now();
    const message = got.statusMessage ? dim(`  "${got.statusMessage}"`) : '';
    out('task', `${bold('→ POST')} tasks/get ${dim(`(waited ${ms(waited)})`)}   ${bold('←')} ${yellow(got.status)}${message}`);
    if (['completed', 'failed', 'cancelled'].includes(got.status)) {
      final = got;
      break;
    }
  }
  const text = final?.result?.content?.[0]?.text;
  const taskOk = final?.status === 'completed' && text === `completed ${args.steps} steps`;
  out(
    'task',
    taskOk
      ? green(`   result: ${text} (after ${polls} polls, ${ms(performance.now() - started)})`)
      : red(`   no result: ${JSON.stringify(final)}`),
  );
  results.push({
    tag: 'call 3 (2026, task)',
    ok: taskOk,
    detail: `${polls} polls at ${task?.pollIntervalMs} ms, result ${JSON.stringify(text)}`,
  });

  console.log();
  console.log(bold(`── call 4: the same long_task from a 2026-07-28 client without the extension ──`));
  console.log(dim('   closeSSEStream returns false: the answer, and its progress, stay on the one response stream'));
  const res = await post(url, 1, 'tools/call', { name: 'long_task', arguments: args, _meta: { progressToken: 'demo' } });
  out('stream', `${bold('→ POST')} tools/call long_task   ${bold('←')} ${res.status} ${res.headers.get('content-type')}`);
  const steps = [];
  const last = await readSse(res, (message) => {
    if (message.method === 'notifications/progress') {
      steps.push(message.params.progress);
      out('stream', `   progress ${message.params.progress}/${message.params.total}`);
    }
  });
  const streamText = last?.result?.content?.[0]?.text;
  const inOrder = steps.length === args.steps && steps.every((s, i) => s === i + 1);
  const streamOk = inOrder && streamText === `completed ${args.steps} steps`;
  out(
    'stream',
    streamOk
      ? green(`   result: ${streamText}, on the same stream; no close, no resume`)
      : red(`   wrong: steps ${steps}, result ${streamText}`),
  );
  results.push({
    tag: 'call 4 (2026, one stream)',
    ok: streamOk,
    detail: `${steps.length} progress events in order, result ${JSON.stringify(streamText)}`,
  });
  return results;
}
