import { isAlreadyExists, isNotFound } from "./errors.ts";
import { mergeLabels } from "./labels.ts";
import { applyMergePatch, type MergePatch } from "./merge-patch.ts";
import { controllerOf, controllerRefTo, isOwnedBy, upsertOwnerReference } from "./owner-references.ts";
import { keyOf } from "./paths.ts";
import type { Kube, KubeObject, OwnerReference, Resource, WriteOptions } from "./port.ts";

export interface EnsureOptions<T extends KubeObject> {
  /** The object that controls `desired`; it gets a controller reference to it. */
  owner: KubeObject;
  /**
   * The kind-specific fields this controller owns, as a merge patch to apply to `observed`, or
   * null when they already match `desired`. Usually `fieldsPatch(observed, desired, paths)`.
   * Labels, annotations and the owner reference are handled by `ensureObject` itself.
   */
  ownedFields?: (observed: T, desired: T) => MergePatch | null;
  fieldManager?: string;
  /**
   * Create first and treat AlreadyExists as the read: one request when the object is absent, two
   * (the refused create and a GET) when it exists. The default reads first: one request when it
   * exists, two when absent. Set it where absence is known or likely (the object's Namespace was
   * created by this pass, the owner has never converged).
   */
  createFirst?: boolean;
}

export type EnsureResult<T extends KubeObject> =
  | { result: "created"; object: T }
  | { result: "updated"; object: T }
  | { result: "unchanged"; object: T }
  /** Exists but someone else controls it (or nobody does); nothing was written. */
  | { result: "conflict"; observed: T; controller: OwnerReference | undefined };

/**
 * Makes one owned object match `desired` in the fields this controller owns, writing only on
 * drift:
 *
 * - absent → create it (with our labels and a controller reference to `owner`);
 * - present but controlled by someone else, or by nobody → `conflict`: never adopt, nothing written;
 * - our labels/annotations, the owner reference and `ownedFields` match → `unchanged`, no write;
 * - otherwise → update `observed` with just those fields, guarded by its resourceVersion, so fields
 *   the API server or other systems set (a Service's clusterIP, others' labels) survive.
 *
 * An object that references `owner` without the controller flag (owned before controller refs
 * were used) is ours: its reference converges to a controller one.
 *
 * Caveats: a concurrent create (AlreadyExists) is resolved by reading the winner and carrying on
 * (with `createFirst`, every existing object is resolved that way);
 * a concurrent update surfaces as ConflictError (classified "conflict": requeue). Labels and
 * annotations are only added or overridden, never removed.
 */
export async function ensureObject<T extends KubeObject>(
  kube: Kube,
  res: Resource,
  desired: T,
  options: EnsureOptions<T>,
): Promise<EnsureResult<T>> {
  const writeOpts: WriteOptions = options.fieldManager ? { fieldManager: options.fieldManager } : {};
  const ownerRef = controllerRefTo(options.owner);
  const key = keyOf(desired);

  const create = async (): Promise<T> => {
    const refs = upsertOwnerReference(desired.metadata.ownerReferences, ownerRef).refs;
    return kube.create<T>(
      res,
      { ...desired, metadata: { ...desired.metadata, ownerReferences: refs } },
      writeOpts,
    );
  };
  /** The object that won a create race (or was there all along); the create's error if it is gone again. */
  const readAfterAlreadyExists = async (createErr: unknown): Promise<T> => {
    if (!isAlreadyExists(createErr)) throw createErr;
    try {
      return await kube.get<T>(res, key);
    } catch {
      throw createErr;
    }
  };

  let observed: T;
  if (options.createFirst) {
    try {
      return { result: "created", object: await create() };
    } catch (createErr) {
      observed = await readAfterAlreadyExists(createErr);
    }
  } else {
    try {
      observed = await kube.get<T>(res, key);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        return { result: "created", object: await create() };
      } catch (createErr) {
        observed = await readAfterAlreadyExists(createErr);
      }
    }
  }

  const controller = controllerOf(observed);
  if (controller ? controller.uid !== ownerRef.uid : !isOwnedBy(observed, options.owner)) {
    return { result: "conflict", observed, controller };
  }

  const labels = mergeLabels(observed.metadata.labels, desired.metadata.labels);
  const annotations = mergeLabels(observed.metadata.annotations, desired.metadata.annotations);
  const refs = upsertOwnerReference(observed.metadata.ownerReferences, ownerRef);
  const patch = options.ownedFields?.(observed, desired) ?? null;
  if (!labels.changed && !annotations.changed && !refs.changed && patch === null) {
    return { result: "unchanged", object: observed };
  }

  const next = applyMergePatch(observed, patch ?? {});
  next.metadata = { ...observed.metadata, ownerReferences: refs.refs };
  if (labels.changed) next.metadata.labels = labels.labels;
  if (annotations.changed) next.metadata.annotations = annotations.labels;
  return { result: "updated", object: await kube.update<T>(res, next, writeOpts) };
}
