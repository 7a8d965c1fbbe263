/**
 * What the clients of the serverless simulation do, for tests/serverless/*.test.ts and
 * `pnpm demo:serverless`: SDK v1 clients (2025-11-25) poll `long_task` with `closeEvery` and answer
 * an elicitation mid-call; SDK v2 clients with `@modelcontextprotocol/ext-tasks` (2026-07-28) run
 * `long_task` as a task and answer `confirm_delete`'s question through `tasks/update`. Each run
 * is audited: every step once and in order, every result as the fixture gives it.
 */
import { connectClient, connectTaskSession } from './clients.js';
import { oneTo } from './long-task.js';
import type { ServerlessPlatform } from './serverless.js';

const clientInfo = { name: 'serverless-task-client', version: '1.0.0' };

export const LONG_TASK = { steps: 6, intervalMs: 120, closeEvery: 2, retryMs: 100 };

/** What one client did, and what went wrong (empty when its audit passed). */
export interface ClientRun {
  name: string;
  era: '2025-11-25' | '2026-07-28';
  calls: number;
  /** `long_task` steps the client heard (log notifications, or the task's status messages for a task). */
  events: number;
  problems: string[];
  /** The JSON-RPC error a call ended with, if any (e.g. the lost-instance error). */
  errors: string[];
}

/** An SDK v1 client: `long_task` polled with `closeEvery`, then `test_elicitation`, answered through whichever instance. */
export async function legacyClient(url: string, name: string): Promise<ClientRun> {
  const run: ClientRun = { name, era: '2025-11-25', calls: 0, events: 0, problems: [], errors: [] };
  const client = await connectClient(url, name);
  try {
    try {
      run.calls++;
      const result = await client.callLongTask(LONG_TASK, { timeoutMs: 45_000 });
      run.events += client.steps.length;
      const text = JSON.stringify(result.content);
      if (text !== JSON.stringify([{ type: 'text', text: `completed ${LONG_TASK.steps} steps` }]))
        run.problems.push(`long_task answered ${text}`);
      if (JSON.stringify(client.steps) !== JSON.stringify(oneTo(LONG_TASK.steps)))
        run.problems.push(`steps ${JSON.stringify(client.steps)}`);
    } catch (error) {
      run.errors.push((error as Error).message);
    }
    run.calls++;
    try {
      const asked = await client.client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } }, undefined, {
        timeout: 45_000,
      });
      const text = JSON.stringify(asked.content);
      if (!text.includes('action=accept') || !text.includes(name)) run.problems.push(`test_elicitation answered ${text}`);
    } catch (error) {
      run.errors.push((error as Error).message);
    }
  } finally {
    await client.close();
  }
  return run;
}

/** An SDK v2 client with ext-tasks: `long_task` as a task, then `confirm_delete` answered mid-task. */
export async function taskClient(url: string, name: string): Promise<ClientRun> {
  const run: ClientRun = { name, era: '2026-07-28', calls: 0, events: 0, problems: [], errors: [] };
  const { client, session } = await connectTaskSession(url, {
    clientInfo,
    idPrefix: name,
    onInputRequest: async () => ({ action: 'accept', content: { confirm: true } }),
  });
  try {
    run.calls++;
    const execution = await session.callTool('long_task', { ...LONG_TASK }, { metadata: { 'io.modelcontextprotocol/logLevel': 'info' } });
    const { outcome } = await execution.settle();
    const text = JSON.stringify(outcome.status === 'completed' ? outcome.result : outcome);
    if (!text.includes(`completed ${LONG_TASK.steps} steps`)) run.problems.push(`long_task task ended ${text}`);
    else run.events += LONG_TASK.steps;
    run.calls++;
    const asked = await session.callTool('confirm_delete', { filename: 'report.txt' });
    const settled = await asked.settle();
    const said = JSON.stringify(settled.outcome.status === 'completed' ? settled.outcome.result : settled.outcome);
    if (!said.includes("deleted 'report.txt'")) run.problems.push(`confirm_delete task ended ${said}`);
  } catch (error) {
    run.errors.push((error as Error).message);
  } finally {
    await session.close();
    await client.close();
  }
  return run;
}

/** The figures a run prints (and `pnpm demo:serverless` too). */
export function figures(platform: ServerlessPlatform, runs: ClientRun[]): string {
  const resumes = platform.log.filter((r) => r.lastEventId).length;
  const perInstance = platform.instances.map((_, i) => platform.log.filter((r) => r.instance === i).length);
  return [
    `seed ${platform.seed}: ${runs.length} clients (${runs.filter((r) => r.era === '2025-11-25').length} SDK v1 on 2025-11-25, ${runs.filter((r) => r.era === '2026-07-28').length} SDK v2 + ext-tasks on 2026-07-28)`,
    `calls ${runs.reduce((n, r) => n + r.calls, 0)}, long_task steps heard ${runs.reduce((n, r) => n + r.events, 0)}, resumes (GET + Last-Event-ID) ${resumes}`,
    `requests per instance ${perInstance.join(' / ')}, freezes ${platform.freezes.join(' / ')}, thaws ${platform.thaws.join(' / ')}, sessions restored ${platform.restores().join(' / ')}`,
    `statuses ${JSON.stringify(Object.fromEntries([...new Set(platform.log.map((r) => r.status))].sort().map((s) => [s, platform.log.filter((r) => r.status === s).length])))}`,
  ].join('\n');
}
