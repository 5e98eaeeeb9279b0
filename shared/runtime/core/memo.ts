/**
 * Reads shared within one scope — everything one sweep runs (drift loads, tasks), or the passes
 * of one platform invocation (a queue batch): the first caller of a key loads it, later callers
 * in the same scope get the same answer — e.g. a provider's instances, listed once per sweep for
 * both the drift decision and the orphan collector.
 *
 * Caveats: a memo lives as long as its scope and no longer; nothing in it reaches the next
 * invocation. With `maxAgeMs` an answer older than that is read again.
 */
export interface SweepMemo {
  once<T>(key: string, load: () => Promise<T>): Promise<T>;
}

/** A fresh memo for one sweep or one invocation; answers are reused for at most `maxAgeMs` when set. */
export function createSweepMemo(maxAgeMs = Infinity, now: () => number = Date.now): SweepMemo {
  const held = new Map<string, { at: number; found: Promise<unknown> }>();
  return {
    once<T>(key: string, load: () => Promise<T>): Promise<T> {
      let entry = held.get(key);
      if (!entry || now() - entry.at > maxAgeMs) {
        entry = { at: now(), found: load() };
        held.set(key, entry);
        // A failed read is not remembered: the next caller tries again.
        entry.found.catch(() => held.delete(key));
      }
      return entry.found as Promise<T>;
    },
  };
}
