// Stages of `npm test`: each a child process whose output goes to results/logs/<stage>.log and is
// printed whole when the stage ends (two lanes run at once, so live output would interleave), and a
// timing table at the end. Children run in their own process groups and are stopped by their PIDs.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const running = new Set();

/** Stops every stage still running (Ctrl-C, or a failed `must` stage): their whole process groups. */
export function stopAll(signal = 'SIGTERM') {
  for (const child of running) {
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * Runs `stage` ({ name, cmd, args, env? }) from `cwd`; resolves to { name, lane, code, seconds }.
 * The output is printed in one block when the stage ends, framed by its name.
 */
export function runStage(stage, { cwd, logDir, lane }) {
  mkdirSync(logDir, { recursive: true });
  const file = join(logDir, `${stage.name.replace(/[^\w.-]+/g, '_')}.log`);
  const log = createWriteStream(file);
  const started = performance.now();
  console.log(`▶ ${stage.name}${lane ? ` [${lane}]` : ''}: ${stage.cmd} ${stage.args.join(' ')}`);
  return new Promise((resolve) => {
    const child = spawn(stage.cmd, stage.args, {
      cwd,
      env: { ...process.env, ...stage.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    running.add(child);
    const chunks = [];
    const keep = (chunk) => {
      chunks.push(chunk);
      log.write(chunk);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const finish = (code) => {
      running.delete(child);
      log.end();
      const seconds = (performance.now() - started) / 1000;
      const mark = code === 0 ? '✓' : '✗';
      process.stdout.write(`\n──── ${stage.name} ${'─'.repeat(Math.max(3, 70 - stage.name.length))}\n`);
      process.stdout.write(Buffer.concat(chunks));
      console.log(`${mark} ${stage.name}: exit ${code} in ${seconds.toFixed(1)} s (log: ${file})`);
      resolve({ name: stage.name, lane, code, seconds });
    };
    child.once('error', (error) => {
      chunks.push(Buffer.from(`${error.stack ?? error}\n`));
      finish(127);
    });
    child.once('close', (code, signal) => finish(code ?? (signal ? 128 : 1)));
  });
}

/** Runs each lane's stages in order, the lanes at once; resolves to every stage's result. */
export async function runLanes(lanes, options) {
  const results = await Promise.all(
    Object.entries(lanes).map(async ([lane, stages]) => {
      const done = [];
      for (const stage of stages)
        done.push({ ...(await runStage(stage, { ...options, lane })), counts: stage.counts, report: stage.report });
      return done;
    }),
  );
  return results.flat();
}

/** The per-stage timing table printed at the end of `npm test`. */
export function timingTable(results, wallSeconds) {
  const width = Math.max(...results.map((r) => r.name.length), 5);
  const lines = [`${'stage'.padEnd(width)}  ${'lane'.padEnd(8)}  ${'seconds'.padStart(8)}  result`];
  for (const r of results) {
    lines.push(
      `${r.name.padEnd(width)}  ${(r.lane ?? '-').padEnd(8)}  ${r.seconds.toFixed(1).padStart(8)}  ${r.code === 0 ? 'ok' : `exit ${r.code}`}`,
    );
  }
  lines.push(`${'wall clock'.padEnd(width)}  ${''.padEnd(8)}  ${wallSeconds.toFixed(1).padStart(8)}`);
  return lines.join('\n');
}
