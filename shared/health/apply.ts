/**
 * The thin executor for a health sweep's result: store the status.health patches, then ask for a
 * reconcile of each proxy whose status must change and whose patch landed.
 */

import { mapWithConcurrency } from "../concurrency/index.ts";
import type { Kube, KubeObject, ObjectKey, Resource } from "../kube/index.ts";
import { isConflict, isNotFound } from "../kube/index.ts";
import type { Message, Queue } from "../runtime/index.ts";
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
}

/**
 * @example
 * const result = await probeAll({ ... });
 * await applyHealthSweep({ kube: ctx.kube, queue: ctx.queue }, proxyResource, "proxy", result);
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
  if (messages.length > 0) await deps.queue.send(messages);
  out.reconcilesRequested = messages.length;
  return out;
}
