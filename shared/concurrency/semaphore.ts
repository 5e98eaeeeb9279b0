/** At most `limit` calls of {@link Semaphore.run} in flight; the others wait their turn, first come first served. */
export interface Semaphore {
  run<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * A counting semaphore. Unlike {@link mapWithConcurrency}'s workers, a caller holds a slot only
 * for the call it wraps, so whatever it awaits between calls (a pause) leaves the slot to others.
 *
 * @example
 * const slots = semaphore(6);
 * await Promise.all(targets.map(async (t) => { await slots.run(() => probe(t)); await pause(); await slots.run(() => probe(t)); }));
 */
export function semaphore(limit: number): Semaphore {
  const max = Math.max(1, Math.floor(limit) || 1);
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  return {
    async run(fn) {
      if (inFlight >= max) await new Promise<void>((r) => waiting.push(r));
      else inFlight++;
      try {
        return await fn();
      } finally {
        const next = waiting.shift();
        if (next) next();
        else inFlight--;
      }
    },
  };
}
