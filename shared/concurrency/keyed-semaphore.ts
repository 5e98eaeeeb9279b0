import { type Semaphore, semaphore } from "./semaphore.ts";

/** At most `limit` calls in flight per key; each key waits its own turn, first come first served. */
export interface KeyedSemaphore {
  run<T>(key: string, fn: () => Promise<T>): Promise<T>;
}

/**
 * A {@link semaphore} per key, made when a key first calls and forgotten once it is idle, so the
 * keys seen over time cost nothing. One key's waiting calls never hold another key's turn.
 *
 * @example
 * const perNamespace = keyedSemaphore(8);
 * await perNamespace.run(proxy.namespace, () => slots.run(() => probe(proxy)));
 */
export function keyedSemaphore(limit: number): KeyedSemaphore {
  const byKey = new Map<string, { slots: Semaphore; users: number }>();
  return {
    async run(key, fn) {
      let entry = byKey.get(key);
      if (!entry) {
        entry = { slots: semaphore(limit), users: 0 };
        byKey.set(key, entry);
      }
      entry.users++;
      try {
        return await entry.slots.run(fn);
      } finally {
        if (--entry.users === 0) byKey.delete(key);
      }
    },
  };
}
