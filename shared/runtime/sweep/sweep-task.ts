import type { KubeObject } from "../../kube/index.ts";
import { type Context, createSweepMemo, type SweepMemo } from "../core/index.ts";

export { createSweepMemo, type SweepMemo } from "../core/index.ts";

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
  /**
   * Run only in the sweeps where the controller's drift runs (once per `resyncSeconds`, and a
   * host's first sweep), for work whose findings cannot change within a drift period anyway —
   * it then shares the drift's lists instead of making its own every sweep.
   */
  withDrift?: boolean;
  /**
   * Keep its counts out of the sweep's log line (a gauge whose counts the metric already says);
   * they stay in the sweep's summary.
   */
  quiet?: boolean;
  /** Begins this sweep's run of the task. */
  start(ctx: Context, memo: SweepMemo, info?: SweepRunInfo): SweepTaskRun;
}

/** What a task's run knows of its sweep. */
export interface SweepRunInfo {
  /**
   * The instant the sweep plans its period from: its schedule's time where the platform gives
   * one (see `sweepInstant`), else the clock at its start. Plan from this, and count delays from
   * it, so that sweeps tile the clock whatever their invocations' jitter.
   */
  at: Date;
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
  info?: SweepRunInfo,
): Promise<Record<string, number>> {
  const run = task.start(ctx, memo, info);
  for await (const page of pages) await run.page(page);
  return run.finish();
}
