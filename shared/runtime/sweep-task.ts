import type { KubeObject } from "../kube/index.ts";
import type { Context } from "./types.ts";

/**
 * Periodic work a controller hangs on the sweep (health probes, orphan collection, lease
 * cleanup, gauges). It is fed the primaries the sweep lists, one page at a time, so it never
 * lists them again and never sees the whole fleet at once; `finish` returns counts for the
 * sweep's summary line.
 *
 * Caveats: a task runs once per sweep on whatever instance runs the sweep; it must keep no state
 * between runs except in the cluster (annotations, Leases) or behind a port. Within a run it may
 * keep state bounded by something other than the number of primaries (instances, Leases, a
 * partial probe shard per delay) and must say so; a page is not retained after `page` returns.
 */
export interface SweepTask {
  name: string;
  /** The controller whose primaries the task receives. */
  controller: string;
  /** Begins this sweep's run of the task. */
  start(ctx: Context, memo: SweepMemo): SweepTaskRun;
}

/** One sweep's run of a {@link SweepTask}. */
export interface SweepTaskRun {
  /** One page of the listed primaries (at most the sweep's page size), in list order. */
  page(primaries: readonly KubeObject[]): Promise<void>;
  /** After the last page: finish the work and return the counts. */
  finish(): Promise<Record<string, number>>;
}

/**
 * Runs a task over `pages` outside a sweep (tests, benches): start, each page, finish.
 *
 * @example
 * const counts = await runSweepTask(leaseSweepTask(), ctx, [proxies]);
 */
export async function runSweepTask(
  task: SweepTask,
  ctx: Context,
  pages: Iterable<readonly KubeObject[]> | AsyncIterable<readonly KubeObject[]>,
  memo: SweepMemo = createSweepMemo(),
): Promise<Record<string, number>> {
  const run = task.start(ctx, memo);
  for await (const page of pages) await run.page(page);
  return run.finish();
}

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
