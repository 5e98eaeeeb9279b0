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
  run(ctx: Context, primaries: readonly KubeObject[], memo?: SweepMemo): Promise<Record<string, number>>;
}

/**
 * Reads shared by everything one sweep runs (drift loads, tasks): the first caller of a key
 * loads it, later callers in the same sweep get the same answer — e.g. a provider's instances,
 * listed once per sweep for both the drift decision and the orphan collector.
 */
export interface SweepMemo {
  once<T>(key: string, load: () => Promise<T>): Promise<T>;
}

/** A fresh memo for one sweep. */
export function createSweepMemo(): SweepMemo {
  const held = new Map<string, Promise<unknown>>();
  return {
    once<T>(key: string, load: () => Promise<T>): Promise<T> {
      let found = held.get(key) as Promise<T> | undefined;
      if (!found) {
        found = load();
        held.set(key, found);
        // A failed read is not remembered: the next caller tries again.
        found.catch(() => held.delete(key));
      }
      return found;
    },
  };
}
