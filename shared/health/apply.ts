/**
 * The thin executor for a health sweep's result: store the status.health patches, then ask for a
 * reconcile of each proxy whose status must change and whose patch landed.
 */

import { mapWithConcurrency } from "../concurrency/index.ts";
import type { Kube, KubeObject, ObjectKey, Resource } from "../kube/index.ts";
import { isConflict, isNotFound } from "../kube/index.ts";
import type { Message, Queue } from "../runtime/index.ts";
import type { HealthState } from "./state.ts";
import { healthStatusPatch } from "./stored-state.ts";
import type { HealthSweepResult } from "./sweep.ts";

export interface AppliedHealthSweep {
  written: number;
  /** Patches that met a newer resourceVersion or a deleted object: recomputed next sweep. */
  conflicts: number;
  /** The keys of those patches. */
  conflictKeys: ObjectKey[];
  /** Patches that failed otherwise. */
  failed: number;
  /** The objects as the API server returned them after each landed patch (its new resourceVersion). */
  stored: Array<{ key: ObjectKey; object: KubeObject }>;
  reconcilesRequested: number;
  /**
   * Reconcile requests the queue did not take: their reported markers were stored back as they
   * were, so the next probe of each reports again (000 §6).
   */
  reconcilesLost: number;
}

/**
 * @example
 * const result = await probeAll({ ... });
 * await applyHealthSweep({ kube: ctx.kube, queue: ctx.queue }, proxyResource, "proxy", result);
 *
 * A reconcile request the queue does not take leaves no report behind: the reported markers of
 * its Proxies are stored back as they were (guarded by the resourceVersion the first patch
 * returned), so the next probe finds the report still due and asks again — not the Proxy drift,
 * minutes later (000 §6).
 *
 * Caveats: a reconcile is requested only after its patch succeeded, because the reconciler reads
 * the stored health; on a Conflict neither happens and the next sweep redoes both from what is stored.
 * Other patch errors are counted, not thrown: the sweep revisits every proxy anyway.
 */
export async function applyHealthSweep(
  deps: { kube: Kube; queue: Queue },
  resource: Resource,
  controller: string,
  result: Pick<HealthSweepResult, "statusPatches" | "reconcileKeys">,
  concurrency = 8,
): Promise<AppliedHealthSweep> {
  const out: AppliedHealthSweep = {
    written: 0,
    conflicts: 0,
    conflictKeys: [],
    failed: 0,
    stored: [],
    reconcilesRequested: 0,
    reconcilesLost: 0,
  };
  const landed = new Set<string>();
  const id = (k: ObjectKey) => `${k.namespace ?? ""}/${k.name}`;
  await mapWithConcurrency(result.statusPatches, concurrency, async ({ key, patch }) => {
    try {
      out.stored.push({ key, object: await deps.kube.patchStatus(resource, key, patch) });
      out.written++;
      landed.add(id(key));
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) {
        out.conflicts++;
        if (isConflict(err)) out.conflictKeys.push(key);
      } else out.failed++;
    }
  });
  const messages: Message[] = result.reconcileKeys
    .filter((k) => landed.has(id(k)))
    .map((k) => ({
      request: { controller, ...(k.namespace ? { namespace: k.namespace } : {}), name: k.name },
      attempt: 0,
      trigger: { kind: "drift" as const, reason: "health-report" },
    }));
  if (messages.length === 0) return out;
  try {
    await deps.queue.send(messages);
    out.reconcilesRequested = messages.length;
  } catch {
    out.reconcilesLost = await unreport(deps.kube, resource, result, out.stored, concurrency);
  }
  return out;
}

/** Stores the `unreported` state of each landed patch whose reconcile was not sent; the count restored. */
async function unreport(
  kube: Kube,
  resource: Resource,
  result: Pick<HealthSweepResult, "statusPatches" | "reconcileKeys">,
  stored: AppliedHealthSweep["stored"],
  concurrency: number,
): Promise<number> {
  const id = (k: ObjectKey) => `${k.namespace ?? ""}/${k.name}`;
  const wanted = new Set(result.reconcileKeys.map(id));
  const versions = new Map(stored.map((s) => [id(s.key), s.object.metadata.resourceVersion]));
  const undo = result.statusPatches.filter(
    (p) => p.unreported && wanted.has(id(p.key)) && versions.has(id(p.key)),
  );
  let restored = 0;
  await mapWithConcurrency(undo, concurrency, async ({ key, unreported }) => {
    const patch = healthStatusPatch(undefined, unreported as HealthState, versions.get(id(key)));
    if (!patch) return;
    try {
      await kube.patchStatus(resource, key, patch);
      restored++;
    } catch {
      // A newer write (a pass, the next probe) already stored what is true: it decides next time.
    }
  });
  return restored;
}
