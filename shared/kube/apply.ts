import { keyOf } from "./paths.ts";
import type { Kube, KubeObject, Resource } from "./port.ts";

/**
 * Server-side applies `obj` as `fieldManager`: the server merges it, records which fields this
 * manager owns, and removes fields the manager applied before but left out now.
 *
 * Caveats: without `force` a field owned by another manager with a different value fails with a
 * ConflictError (causes name the fields); with `force` this manager takes them over. Send only the
 * fields you mean to own, never an object read from the server.
 */
export function serverSideApply<T extends KubeObject = KubeObject>(
  kube: Kube,
  res: Resource,
  obj: KubeObject,
  fieldManager: string,
  force = false,
): Promise<T> {
  return kube.patch<T>(res, keyOf(obj), { type: "apply", body: obj, fieldManager, force });
}
