/**
 * Seeds, a small PRNG and the run mode shared by the randomized reliability tests.
 *
 * Every random test prints its seed; `SEED=<n>` replays exactly that run. `LONG=1` (set by
 * `pnpm test:chaos` and `pnpm test:fuzz`) switches from the CI sample to the full counts.
 */

/** True under `pnpm test:chaos` / `pnpm test:fuzz`. */
export const LONG = process.env.LONG === '1';

/** `short` in the normal `vitest run`, `long` under `LONG=1`; an env override wins over both. */
export function count(short: number, long: number, env?: string): number {
  const override = env ? Number(process.env[env]) : NaN;
  if (Number.isInteger(override) && override > 0) return override;
  return LONG ? long : short;
}

/** The seed of this run: `SEED` if given, else a fresh one. Printed so a failure can be replayed. */
export function seedFor(what: string): number {
  const given = Number(process.env.SEED);
  const seed = Number.isInteger(given) ? given >>> 0 : (Math.random() * 2 ** 32) >>> 0;
  console.log(`[${what}] seed ${seed} (replay with SEED=${seed})`);
  return seed;
}

/** mulberry32: tiny, fast, good enough to pick offsets and shapes, and reproducible from a seed. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }
  /** One of `choices`, each as likely as its weight. */
  weighted<T>(choices: ReadonlyArray<readonly [weight: number, value: T]>): T {
    let left = this.next() * choices.reduce((sum, [w]) => sum + w, 0);
    for (const [w, value] of choices) if ((left -= w) < 0) return value;
    return choices.at(-1)![1];
  }
  /** A child generator, so concurrent tasks do not depend on each other's draw order. */
  fork(): Rng {
    return new Rng((this.next() * 2 ** 32) >>> 0);
  }
}

/** The generator of case `index` of a run: any one case can be replayed without the ones before it. */
export function caseRng(seed: number, index: number): Rng {
  return new Rng(seed ^ Math.imul(index + 1, 0x9e3779b1));
}
