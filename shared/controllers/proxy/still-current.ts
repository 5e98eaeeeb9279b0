import type { Kube, KubeObject } from "../../kube/index.ts";
import { isNotFound } from "../../kube/index.ts";
import { proxyResource } from "./api.ts";

/**
 * Re-reads the Proxy before a provider side effect (create, delete): true when the stored Proxy is
 * still exactly the version this pass decided on (same UID and resourceVersion).
 *
 * A pass may be deciding on a sweep's snapshot or on a read that a concurrent pass has since
 * overtaken; without this read a stale pass could delete the replacement a newer pass just created
 * (same deterministic name) or create an instance for a Proxy already deleted. One GET, paid only
 * on the rare passes that create or delete.
 */
export async function stillCurrent(kube: Kube, object: KubeObject): Promise<boolean> {
  const { namespace = "", name = "", uid, resourceVersion } = object.metadata;
  try {
    const live = await kube.get(proxyResource, { namespace, name });
    return live.metadata.uid === uid && live.metadata.resourceVersion === resourceVersion;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}
