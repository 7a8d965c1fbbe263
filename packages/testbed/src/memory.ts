/** Memory readings for the reliability suite: RSS of this process or of a server in another one. */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** A full collection before reading memory, so earlier tests' garbage does not count (best effort). */
export const collect: () => void = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return () => {};
  }
})();

/** The pid of the process listening on a local TCP port (Linux /proc), for a server in another process. */
export function listenerPid(port: number): number | undefined {
  try {
    const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
    const inodes = new Set<string>();
    for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
        const cols = line.trim().split(/\s+/);
        if (cols[1]?.endsWith(hex) && cols[3] === '0A') inodes.add(cols[9]!);
      }
    }
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let fds: string[] = [];
      try {
        fds = readdirSync(`/proc/${pid}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          if (m && inodes.has(m[1]!)) return Number(pid);
        } catch {
          // Gone meanwhile.
        }
      }
    }
  } catch {
    // Not Linux.
  }
  return undefined;
}

export function rssOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  if (pid === process.pid) return process.memoryUsage().rss;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : undefined;
}
