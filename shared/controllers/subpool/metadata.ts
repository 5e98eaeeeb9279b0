import { patchMetadataGuarded } from "../../kube/guarded-metadata.ts";
import type { Kube, KubeObject } from "../../kube/port.ts";
import { subPoolResource } from "./api.ts";

/** A SubPool's finalizers, written guarded by its resourceVersion (see {@link patchMetadataGuarded}). */
export function patchFinalizers(kube: Kube, object: KubeObject, finalizers: string[]): Promise<void> {
  return patchMetadataGuarded(kube, subPoolResource, object, { finalizers });
}
