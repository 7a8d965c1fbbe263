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

// Each stage runs under `sh`, whose `times` then reports the CPU its processes used (those the
// stage waited for, as each parent reaps its children): on a machine of a few cores the lanes
// share, this is what a stage costs the others, where its wall clock also counts their load. The
// command does not get the descriptor `times` writes to: a process it leaves running must not hold
// the stage open.
const CPU_WRAPPER = '"$0" "$@" 3>&-; code=$?; times >&3; exit $code';

/** User + system CPU seconds of the children, from the second line of `times` ("0m1.50s 0m0.25s"). */
function childCpuSeconds(text) {
  const line = text.trim().split('\n')[1] ?? '';
  let total = 0;
  for (const [, minutes, seconds] of line.matchAll(/(\d+)m([\d.]+)s/g)) total += Number(minutes) * 60 + Number(seconds);
  return line ? total : undefined;
}

/**
 * Runs `stage` ({ name, cmd, args, env? }) from `cwd`; resolves to { name, lane, code, seconds,
 * cpuSeconds }. The output is printed in one block when the stage ends, framed by its name.
 */
export function runStage(stage, { cwd, logDir, lane }) {
  mkdirSync(logDir, { recursive: true });
  const file = join(logDir, `${stage.name.replace(/[^\w.-]+/g, '_')}.log`);
  const log = createWriteStream(file);
  const started = performance.now();
  console.log(`▶ ${stage.name}${lane ? ` [${lane}]` : ''}: ${stage.cmd} ${stage.args.join(' ')}`);
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', ['-c', CPU_WRAPPER, stage.cmd, ...stage.args], {
      cwd,
      env: { ...process.env, ...stage.env },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let times = '';
    child.stdio[3].on('data', (d) => (times += d));
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
      const cpuSeconds = childCpuSeconds(times);
      const cpu = cpuSeconds === undefined ? '' : `, ${cpuSeconds.toFixed(1)} CPU-s`;
      console.log(`${mark} ${stage.name}: exit ${code} in ${seconds.toFixed(1)} s${cpu} (log: ${file})`);
      resolve({ name: stage.name, lane, code, seconds, cpuSeconds });
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

/**
 * The per-stage table printed at the end of `npm test`: wall clock and CPU seconds of each stage
 * (`-` where the stage's CPU is unknown: it did not run under the wrapper), and the totals.
 */
export function timingTable(results, wallSeconds) {
  const width = Math.max(...results.map((r) => r.name.length), 5);
  const cpu = (r) => (r.cpuSeconds === undefined ? '-' : r.cpuSeconds.toFixed(1));
  const lines = [`${'stage'.padEnd(width)}  ${'lane'.padEnd(8)}  ${'seconds'.padStart(8)}  ${'CPU-s'.padStart(8)}  result`];
  for (const r of results) {
    const result = r.code === 0 ? 'ok' : `exit ${r.code}`;
    lines.push(
      `${r.name.padEnd(width)}  ${(r.lane ?? '-').padEnd(8)}  ${r.seconds.toFixed(1).padStart(8)}  ${cpu(r).padStart(8)}  ${result}`,
    );
  }
  const cpuTotal = results.reduce((sum, r) => sum + (r.cpuSeconds ?? 0), 0);
  lines.push(`${'wall clock'.padEnd(width)}  ${''.padEnd(8)}  ${wallSeconds.toFixed(1).padStart(8)}  ${cpuTotal.toFixed(1).padStart(8)}`);
  return lines.join('\n');
}
