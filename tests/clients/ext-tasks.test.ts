/**
 * The Tasks extension (SEP-2663) through a client nobody here wrote: the extension's own TypeScript
 * requester, `@modelcontextprotocol/ext-tasks` 0.2.2, on the SDK v2 `Client` pinned to 2026-07-28,
 * against every adapter and both fixtures. The package decides when a call is a task, when to poll,
 * how to cancel and how to answer `input_required` with `tasks/update`; the test only supplies the
 * HTTP hop its README asks the host for (`rawDispatch`: POST the framed request, return the
 * JSON-RPC answer) and records each request it makes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/client';
import type { TaskEnabledSession, TaskView } from '@modelcontextprotocol/ext-tasks/client';
import { adapters, type ServerUnderTest, fixtures, serve } from '@mcp-kit/testbed/adapters';
import { connectTaskSession } from '@mcp-kit/testbed/clients';
import { modernAnswer, modernPost } from '@mcp-kit/testbed/fetch-client';
import { modernRequest, envelope } from '@mcp-kit/testbed/requests';
import { completed } from '@mcp-kit/testbed/long-task';

const TASKS = 'io.modelcontextprotocol/tasks';
const clientInfo = { name: 'mcp-kit-ext-tasks-client', version: '1.0.0' };

interface Sent {
  method: string;
  startedAt: number;
  answeredAt: number;
  result?: { status?: string; pollIntervalMs?: number; statusMessage?: string };
  error?: { code: number };
}

/** A task session over the SDK v2 client, and every request the package dispatched itself. */
async function taskSession(url: string, answers: Record<string, unknown>) {
  const sent: Sent[] = [];
  const questions: unknown[] = [];
  const { client, session } = await connectTaskSession(url, {
    clientInfo,
    idPrefix: 'ext',
    onAnswer: (request, startedAt, answer) =>
      sent.push({ method: request.method, startedAt, answeredAt: Date.now(), result: answer.result, error: answer.error }),
    onInputRequest: async (request) => {
      questions.push(request);
      return answers;
    },
  });
  return { client, session, sent, questions };
}

/** Raw `tasks/get` outside the package: what the server says about a task afterwards. */
async function taskState(url: string, taskId: string) {
  const meta = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } });
  const { answer } = await modernAnswer(await modernPost(url, modernRequest('check', 'tasks/get', { taskId }, meta)));
  return answer.result;
}

describe.each(fixtures)('$name', (fixture) => {
  describe.each(adapters)('ext-tasks client on $name', (adapter) => {
    let sut: ServerUnderTest;
    const open: Array<{ client: Client; session: TaskEnabledSession }> = [];
    const connect = async (answers: Record<string, unknown> = {}) => {
      const c = await taskSession(sut.url, answers);
      open.push(c);
      return c;
    };
    beforeAll(async () => {
      sut = await serve(adapter, fixture);
    });
    afterAll(async () => {
      for (const { session, client } of open) {
        await session.close();
        await client.close();
      }
      await sut?.close();
    });

    it('sees the extension in server/discover and runs long_task with closeEvery as a task: polled at pollIntervalMs, its last log as statusMessage, the result once', async () => {
      const { session, sent } = await connect();
      expect(session.capabilities).toMatchObject({ execution: true, cancellation: true, inputResponses: true });
      const execution = await session.callTool(
        'long_task',
        { steps: 6, intervalMs: 60, closeEvery: 2, retryMs: 150 },
        { metadata: { 'io.modelcontextprotocol/logLevel': 'info' } },
      );
      expect(execution.kind).toBe('task');
      const views: TaskView[] = [];
      const { outcome } = await execution.settle({
        onEvent: (event) => {
          if (event.type === 'task') views.push(event.task);
        },
      });
      expect(outcome.status).toBe('completed');
      expect(outcome.status === 'completed' && outcome.result).toMatchObject({ content: completed(6) });

      // The call was answered with the task at the first close, asking for polls 150 ms apart.
      expect(sent[0]).toMatchObject({ method: 'tools/call', result: { status: 'working', pollIntervalMs: 150 } });
      const polls = sent.slice(1);
      expect(polls.length).toBeGreaterThanOrEqual(1);
      expect(polls.every((p) => p.method === 'tasks/get')).toBe(true);
      // The package waits the interval the server asked for between one answer and its next poll.
      for (let i = 0; i < polls.length; i++) expect(polls[i].startedAt - sent[i].answeredAt).toBeGreaterThanOrEqual(145);
      // Exactly one poll saw the end, and it carried the result: nothing was asked again after it.
      expect(polls.filter((p) => p.result?.status === 'completed')).toHaveLength(1);
      expect(polls.at(-1)!.result?.status).toBe('completed');
      // While working, the task told the client how far the tool got (its last log line).
      // What the tool last reported (its log line) reaches the client as the task's statusMessage; a
      // message held back by the 100 ms throttle is written when the task ends, never lost.
      for (const v of views.filter((v) => v.statusMessage)) expect(v.statusMessage).toMatch(/^\{"step":[1-6]\}$/);
      expect(views.at(-1)).toMatchObject({ status: 'completed', statusMessage: '{"step":6}' });
      expect(sut.errors).toEqual([]);
    });

    it('cancels a running task: the outcome is cancelled and the server keeps it cancelled, with no result', async () => {
      const { session, sent } = await connect();
      const execution = await session.callTool('long_task', { steps: 100, intervalMs: 50, closeEvery: 1, retryMs: 100 });
      expect(execution.kind).toBe('task');
      await execution.cancel();
      const { outcome } = await execution.settle();
      expect(outcome.status).toBe('cancelled');
      expect(sent.map((s) => s.method)).toContain('tasks/cancel');
      const taskId = execution.kind === 'task' ? execution.handle.taskId : '';
      const after = await taskState(sut.url, taskId);
      expect(after.status).toBe('cancelled');
      expect(after).not.toHaveProperty('result');
      expect(sut.errors).toEqual([]);
    });

    it('answers an elicitation asked during the task (confirm_delete) through tasks/update; the task completes with the answer', async () => {
      const { session, sent, questions } = await connect({ action: 'accept', content: { confirm: true } });
      const execution = await session.callTool('confirm_delete', { filename: 'report.txt' });
      expect(execution.kind).toBe('task');
      const { outcome } = await execution.settle();
      expect(outcome.status === 'completed' && outcome.result).toMatchObject({ content: [{ type: 'text', text: "deleted 'report.txt'" }] });
      expect(questions).toEqual([
        expect.objectContaining({ kind: 'elicitation', params: expect.objectContaining({ message: "Delete 'report.txt'?" }) }),
      ]);
      const methods = sent.map((s) => s.method);
      expect(methods).toContain('tasks/update');
      expect(sent.find((s) => s.result?.status === 'input_required')).toBeDefined();
      expect(methods.indexOf('tasks/update')).toBeGreaterThan(sent.findIndex((s) => s.result?.status === 'input_required'));
      expect(sut.errors).toEqual([]);
    });
  });
});
