import type { KubeObject } from "../kube/index.ts";
import type { Context } from "./types.ts";

/**
 * Periodic work a controller hangs on the sweep (health probes, orphan collection, lease
 * cleanup, gauges). It gets the primaries the sweep just listed, so it never lists them again,
 * and returns counts for the sweep's summary line.
 *
 * Caveats: a task runs once per sweep on whatever instance runs the sweep; it must keep no state
 * between runs except in the cluster (annotations, Leases) or behind a port.
 */
export interface SweepTask {
  name: string;
  /** The controller whose primaries the task receives. */
  controller: string;
  run(ctx: Context, primaries: readonly KubeObject[]): Promise<Record<string, number>>;
}
