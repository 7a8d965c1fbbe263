/**
 * The benchmark's exit code: `--short` (what `npm test` runs) fails when an mcp-kit server fails a
 * workload or an anchor does not start, and only reports an anchor that fails a workload; a full
 * run fails on anything. The end-to-end cases run the real CLI against real server processes, one
 * of them made to fail for real (BENCH_SABOTAGE: it hangs up on every MCP request, or exits at start).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- plain ESM module without types
import { describeFailures, judgeFailures } from '../src/verdict.mjs';

const cli = fileURLToPath(new URL('../src/cli.mjs', import.meta.url));
const servers = [{ name: 'bare' }, { name: 'sdk' }, { name: 'kit-koa', kit: true }];

describe('judgeFailures', () => {
  const results = {
    polling: { sdk: { error: 'Error: stalled', phase: 'workload' }, 'kit-koa': { events: 1 } },
    burst: { bare: { error: 'Error: did not answer', phase: 'start' } },
  };

  it('--short: an anchor failing a workload is reported, an anchor that did not start fails the run', () => {
    const { fatal, reported } = judgeFailures(results, { short: true, servers });
    expect(reported.map((f: { server: string }) => f.server)).toEqual(['sdk']);
    expect(fatal.map((f: { server: string }) => f.server)).toEqual(['bare']);
    expect(describeFailures({ fatal, reported }).join('\n')).toContain('polling sdk (failed): Error: stalled');
  });

  it('--short: any failure of an mcp-kit server fails the run', () => {
    const { fatal } = judgeFailures({ burst: { 'kit-koa': { error: 'Error: x', phase: 'workload' } } }, { short: true, servers });
    expect(fatal).toHaveLength(1);
  });

  it('a full run fails on every failure, anchors included', () => {
    const { fatal, reported } = judgeFailures(results, { short: false, servers });
    expect(fatal).toHaveLength(2);
    expect(reported).toHaveLength(0);
  });
});

interface Ran {
  code: number | null;
  /** stdout alone: the progress lines and the tables, in the order the CLI wrote them. */
  stdout: string;
  /** stdout, then stderr (a failed server's own output, the failure summary): two pipes, so
   * their interleaving is not the order of writing; match lines that span both only in one. */
  out: string;
}

function bench(args: string[], sabotage: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, '--no-docs', ...args], {
      env: { ...process.env, BENCH_SABOTAGE: sabotage },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 110_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, out: `${stdout}\n${stderr}` });
    });
  });
}

describe('pnpm bench exit code, end to end', { timeout: 120_000 }, () => {
  const short = ['--short', '--servers=bare,kit-koa', '--workloads=burst'];

  it('--short: an anchor that fails its workload is in the table and the run still exits 0', async () => {
    const { code, stdout, out } = await bench(short, 'bare');
    // The failed server's output goes to stderr while the next progress line is half written on
    // stdout (a run in CI read "burst kit-koa LISTENING 45355 done" from the two merged).
    expect(stdout).toMatch(/burst\s+bare\s+FAILED/);
    expect(stdout).toMatch(/burst\s+kit-koa\s+done/);
    expect(out).toContain('1 anchor workload runs failed (reported, not failing --short)');
    expect(stdout).toMatch(/\| bare node:http \| failed: /);
    expect(code).toBe(0);
  });

  it('--short: an mcp-kit server that fails its workload fails the run', async () => {
    const { code, stdout, out } = await bench(short, 'kit-koa');
    expect(stdout).toMatch(/burst\s+kit-koa\s+FAILED/);
    expect(out).toContain('1 server/workload runs failed:');
    expect(code).toBe(1);
  });

  it('--short: an anchor that does not start fails the run', async () => {
    const { code, out } = await bench(short, 'bare:start');
    expect(out).toContain('burst bare (did not start)');
    expect(code).toBe(1);
  });

  it('a full run fails when an anchor fails its workload', async () => {
    const { code, out } = await bench(['--servers=bare', '--workloads=burst'], 'bare');
    expect(out).toContain('1 server/workload runs failed:');
    expect(code).toBe(1);
  });
});

describe('pnpm bench --no-next', { timeout: 120_000 }, () => {
  it('leaves out the servers on next start, and so never builds the bench Next app', async () => {
    const { code, stdout } = await bench(['--short', '--no-next', '--servers=bare,kit-next', '--workloads=burst'], '');
    expect(stdout).toMatch(/burst\s+bare\s+done/);
    expect(stdout).not.toMatch(/kit-next|building the bench Next app/);
    expect(code).toBe(0);
  });
});
