import type { Kube, KubeObject } from "../../kube/index.ts";
import { patchMetadataGuarded } from "../../kube/index.ts";
import { subPoolResource } from "./api.ts";

/** A SubPool's finalizers, written guarded by its resourceVersion (see {@link patchMetadataGuarded}). */
export function patchFinalizers(kube: Kube, object: KubeObject, finalizers: string[]): Promise<void> {
  return patchMetadataGuarded(kube, subPoolResource, object, { finalizers });
}
