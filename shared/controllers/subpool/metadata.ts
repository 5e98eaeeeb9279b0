import type { Kube, KubeObject } from "../../kube/port.ts";
import { subPoolResource } from "./api.ts";

/**
 * Writes the SubPool's finalizers with a merge patch guarded by its resourceVersion, then copies
 * the new resourceVersion and finalizers onto `object` (so the executor's status write is guarded
 * by the right version).
 *
 * Caveats: a concurrent writer makes this throw ConflictError; the executor requeues at once.
 */
export async function patchFinalizers(kube: Kube, object: KubeObject, finalizers: string[]): Promise<void> {
  const { name, resourceVersion } = object.metadata;
  const metadata: Record<string, unknown> = { finalizers };
  if (resourceVersion !== undefined) metadata.resourceVersion = resourceVersion;
  const updated = await kube.patch(
    subPoolResource,
    { name: name ?? "" },
    { type: "merge", body: { metadata } },
  );
  object.metadata.resourceVersion = updated.metadata.resourceVersion;
  if (updated.metadata.finalizers) object.metadata.finalizers = updated.metadata.finalizers;
  else delete object.metadata.finalizers;
}
