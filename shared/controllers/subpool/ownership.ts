import type { KubeObject } from "../../kube/index.ts";
import { isControlledBy } from "../../kube/index.ts";
import { subPoolManagedLabel, subPoolManagedValue, subPoolPoolLabel } from "./api.ts";

/** What step 5 found under the derived Namespace's name. */
export type NamespaceOwnership = "absent" | "ours" | "foreign";

/**
 * Whether the derived Namespace is this pool's: controlled by it (by UID) AND labelled managed
 * and with its pool. Anything else of that name is foreign and never adopted — adopting by name
 * would let deleting the pool delete someone else's Namespace and data.
 */
export function namespaceOwnership(namespace: KubeObject | undefined, pool: KubeObject): NamespaceOwnership {
  if (!namespace) return "absent";
  const labels = namespace.metadata.labels ?? {};
  const ours =
    isControlledBy(namespace, pool) &&
    labels[subPoolManagedLabel] === subPoolManagedValue &&
    labels[subPoolPoolLabel] === pool.metadata.name;
  return ours ? "ours" : "foreign";
}

/** A one-line description of who controls `observed`, for conflict messages. */
export function describeController(observed: KubeObject): string {
  const ref = observed.metadata.ownerReferences?.find((r) => r.controller === true);
  return ref ? `controlled by ${ref.kind} ${ref.name} (uid ${ref.uid})` : "not controlled by any object";
}

/** Why a Namespace of the derived name is not this pool's, for the NamespaceConflict message. */
export function namespaceConflictMessage(namespace: KubeObject, pool: KubeObject): string {
  const name = namespace.metadata.name ?? "";
  if (!isControlledBy(namespace, pool)) {
    return `Namespace ${name} exists and is ${describeController(namespace)}; it is never adopted`;
  }
  const labels = namespace.metadata.labels ?? {};
  const missing = [
    labels[subPoolManagedLabel] === subPoolManagedValue
      ? ""
      : `${subPoolManagedLabel}=${subPoolManagedValue}`,
    labels[subPoolPoolLabel] === pool.metadata.name ? "" : `${subPoolPoolLabel}=${pool.metadata.name ?? ""}`,
  ].filter(Boolean);
  return `Namespace ${name} is controlled by this SubPool but lacks the label${missing.length === 1 ? "" : "s"} ${missing.join(", ")}; it is not treated as ours`;
}
