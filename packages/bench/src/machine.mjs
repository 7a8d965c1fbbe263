// What the machine is and how busy it was: the numbers only mean something next to these.
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export function machine() {
  const sh = (cmd) => {
    try {
      return execSync(cmd, { encoding: 'utf8' }).trimEnd();
    } catch {
      return 'unavailable';
    }
  };
  return {
    nproc: sh('nproc'),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    free: sh('free -h'),
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

/** Host-wide CPU time from /proc/stat, in seconds: busy (everything but idle/iowait) and total. */
export function hostCpu() {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const hz = 100;
    const idle = (f[3] ?? 0) + (f[4] ?? 0);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: (total - idle) / hz, total: total / hz, at: Date.now() };
  } catch {
    return undefined;
  }
}

/**
 * How loaded the machine was over an interval: cores busy on average, and how much of that was
 * not this benchmark (other processes), given the CPU seconds the benchmark itself used.
 */
export function loadOver(before, after, ownCpuSeconds) {
  if (!before || !after) return undefined;
  const seconds = (after.at - before.at) / 1000;
  if (seconds <= 0) return undefined;
  const busyCores = (after.busy - before.busy) / seconds;
  return {
    seconds,
    busyCores,
    benchCores: ownCpuSeconds / seconds,
    otherCores: Math.max(0, busyCores - ownCpuSeconds / seconds),
    loadavg: os.loadavg(),
  };
}
