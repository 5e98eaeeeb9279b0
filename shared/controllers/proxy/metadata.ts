import type { Kube, KubeObject } from "../../kube/index.ts";
import { type MetadataChange, patchMetadataGuarded } from "../../kube/index.ts";
import { proxyResource } from "./api.ts";

export type { MetadataChange };

/** A Proxy's finalizers and annotations, written guarded by its resourceVersion (see {@link patchMetadataGuarded}). */
export function patchMetadata(kube: Kube, object: KubeObject, change: MetadataChange): Promise<void> {
  return patchMetadataGuarded(kube, proxyResource, object, change);
}
