import type { Kube, KubeObject } from "../../kube/port.ts";
import { proxyResource } from "./api.ts";

/** What a pass may change in a Proxy's metadata. `null` removes an annotation. */
export interface MetadataChange {
  finalizers?: string[];
  annotations?: Record<string, string | null>;
}

/**
 * Writes finalizers and annotations with a merge patch guarded by the object's resourceVersion,
 * then copies the new resourceVersion, finalizers and annotations onto `object`.
 *
 * Caveats: a concurrent writer makes this throw `ConflictError`; let it propagate — the executor
 * requeues at once and the next pass recomputes. A whole-list finalizer merge patch is only safe
 * because of that guard.
 */
export async function patchMetadata(kube: Kube, object: KubeObject, change: MetadataChange): Promise<void> {
  const { name, namespace, resourceVersion } = object.metadata;
  const metadata: Record<string, unknown> = { ...change };
  if (resourceVersion !== undefined) metadata.resourceVersion = resourceVersion;
  const updated = await kube.patch(
    proxyResource,
    { namespace: namespace ?? "", name: name ?? "" },
    { type: "merge", body: { metadata } },
  );
  object.metadata.resourceVersion = updated.metadata.resourceVersion;
  if (updated.metadata.finalizers) object.metadata.finalizers = updated.metadata.finalizers;
  else delete object.metadata.finalizers;
  if (updated.metadata.annotations) object.metadata.annotations = updated.metadata.annotations;
  else delete object.metadata.annotations;
}
