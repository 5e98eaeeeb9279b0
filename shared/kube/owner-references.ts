import type { KubeObject, OwnerReference } from "./port.ts";

/**
 * The controller reference an owned object carries to `owner`.
 *
 * `controller: true` makes the owned object map back to its owner (intake's `owns`) and lets the
 * garbage collector delete it with the owner. `blockOwnerDeletion` is left unset on purpose:
 * setting it needs `update` on the owner's `finalizers` subresource
 * (OwnerReferencesPermissionEnforcement), which operator service accounts usually lack, and every
 * write of the owned object would then be refused.
 */
export function controllerRefTo(owner: KubeObject): OwnerReference {
  const { name, uid } = owner.metadata;
  if (!name || !uid)
    throw new TypeError(`owner ${owner.kind} has no name or uid (was it read from the server?)`);
  return { apiVersion: owner.apiVersion, kind: owner.kind, name, uid, controller: true };
}

/** The object's controller reference, if any (`metav1.GetControllerOf`). */
export function controllerOf(obj: Pick<KubeObject, "metadata">): OwnerReference | undefined {
  return obj.metadata.ownerReferences?.find((ref) => ref.controller === true);
}

/** Whether `owner` is `obj`'s controller, compared by UID (`metav1.IsControlledBy`). */
export function isControlledBy(
  obj: Pick<KubeObject, "metadata">,
  owner: Pick<KubeObject, "metadata">,
): boolean {
  const ref = controllerOf(obj);
  return ref !== undefined && owner.metadata.uid !== undefined && ref.uid === owner.metadata.uid;
}

/** Whether `obj` references `owner` at all, as controller or not. */
export function isOwnedBy(obj: Pick<KubeObject, "metadata">, owner: Pick<KubeObject, "metadata">): boolean {
  const uid = owner.metadata.uid;
  return uid !== undefined && (obj.metadata.ownerReferences ?? []).some((ref) => ref.uid === uid);
}

function sameOwner(a: OwnerReference, b: OwnerReference): boolean {
  return a.uid === b.uid && a.kind === b.kind && a.apiVersion === b.apiVersion;
}

/**
 * Adds `ref`, or rewrites an existing reference to the same owner (same UID, Kind and APIVersion)
 * whose Name or Controller flag differs — so an object owned before controller references were
 * introduced converges to one. Returns a new list and whether it changed.
 *
 * Caveats: a reference to the same UID under another APIVersion counts as a different owner and is
 * kept beside the new one, as in the Go original.
 */
export function upsertOwnerReference(
  refs: readonly OwnerReference[] | undefined,
  ref: OwnerReference,
): { refs: OwnerReference[]; changed: boolean } {
  const list = [...(refs ?? [])];
  const index = list.findIndex((existing) => sameOwner(existing, ref));
  const existing = index === -1 ? undefined : list[index];
  if (!existing) {
    list.push({ ...ref });
    return { refs: list, changed: true };
  }
  if (existing.name === ref.name && (existing.controller ?? false) === (ref.controller ?? false)) {
    return { refs: list, changed: false };
  }
  list[index] = { ...ref };
  return { refs: list, changed: true };
}
