import { keyOf } from "./paths.ts";
import type { Kube, KubeObject, Resource } from "./port.ts";

/** What a pass may change in its primary's metadata. `null` removes an annotation or label. */
export interface MetadataChange {
  finalizers?: string[];
  annotations?: Record<string, string | null>;
  labels?: Record<string, string | null>;
}

/**
 * Writes `change` to `object`'s metadata with a merge patch guarded by its resourceVersion, then
 * copies the new resourceVersion, finalizers, annotations and labels onto `object`, so the
 * executor's status write that follows is guarded by the right version.
 *
 * Caveats: a concurrent writer makes this throw `ConflictError`; let it propagate — the executor
 * requeues at once and the next pass recomputes. A whole-list finalizer merge patch is only safe
 * because of that guard.
 */
export async function patchMetadataGuarded(
  kube: Kube,
  res: Resource,
  object: KubeObject,
  change: MetadataChange,
): Promise<void> {
  const metadata: Record<string, unknown> = { ...change };
  if (object.metadata.resourceVersion !== undefined)
    metadata.resourceVersion = object.metadata.resourceVersion;
  const updated = await kube.patch(res, keyOf(object), { type: "merge", body: { metadata } });
  object.metadata.resourceVersion = updated.metadata.resourceVersion;
  for (const field of ["finalizers", "annotations", "labels"] as const) {
    if (updated.metadata[field]) object.metadata[field] = updated.metadata[field] as never;
    else delete object.metadata[field];
  }
}
