import { assertNever } from "../../guards/index.ts";
import {
  addFinalizer,
  ConflictError,
  ForbiddenError,
  hasFinalizer,
  InvalidError,
  isNotFound,
  type Kube,
  type KubeObject,
  keyOf,
  type Resource,
  removeFinalizer,
} from "../../kube/index.ts";
import {
  type ControllerDefinition,
  done,
  type FinalizerDeclaration,
  failed,
  isLatched,
  Outcome,
  type OutcomeMetadata,
  type PassContext,
} from "../definition/index.ts";

/**
 * What the runtime does with a controller's finalizer on one pass (pure; the table on
 * {@link FinalizerDeclaration}): `add` it then reconcile, `cleanup` an object being deleted,
 * `release` it from a live object that no longer wants it (cleanup, then reconcile), `skip` an
 * object being deleted that does not hold it, or just `reconcile`.
 */
export type FinalizerStep = "reconcile" | "add" | "cleanup" | "release" | "skip";

/** The step {@link runController} takes for `object` (pure). */
export function finalizerStep(
  declaration: FinalizerDeclaration | undefined,
  object: KubeObject,
): FinalizerStep {
  if (!declaration) return "reconcile";
  const held = hasFinalizer(object.metadata.finalizers, declaration.name);
  if (object.metadata.deletionTimestamp) return held ? "cleanup" : "skip";
  const want = declaration.want?.(object) ?? "hold";
  if (want === "hold" && !held) return "add";
  if (want === "release" && held) return "release";
  return "reconcile";
}

/** The drift reason of a live object whose finalizer is not as it wants ({@link finalizerDrift}). */
export const FINALIZER_DRIFT = "finalizer";

/**
 * Why the sweep sends `primary` a pass for its finalizer (pure): `finalizer` when a live object's
 * finalizer is not as it wants (missing while it holds, held while it releases) and no error latch
 * holds the object (a latched pass is skipped whole, so it could not fix it).
 */
export function finalizerDrift(def: ControllerDefinition, primary: KubeObject): string | undefined {
  if (primary.metadata.deletionTimestamp) return undefined;
  const step = finalizerStep(def.finalizer, primary);
  if (step !== "add" && step !== "release") return undefined;
  return isLatched(def.errorPolicy, primary) ? undefined : FINALIZER_DRIFT;
}

/** What {@link runController} left for the executor. */
export interface ControllerStep {
  outcome: Outcome;
  /**
   * Nothing is to be written after it: the finalizer write was refused, the object is being
   * deleted and holds no finalizer of ours, or its last hold is gone with ours (the API server may
   * have deleted it already).
   */
  final: boolean;
}

/**
 * Runs the controller on the private copy `object` with its finalizer kept as declared (the table
 * on {@link FinalizerDeclaration}): adds it before reconcile, calls `cleanup` on deletion (and on a
 * release), removes it once cleanup is done; writes the metadata an Outcome carries
 * ({@link Outcome.withMetadata}). Every write is a merge patch guarded by the resourceVersion the
 * pass holds, and copies the new one onto `object`; a refused write becomes the outcome.
 *
 * Never throws: a reconcile or cleanup that throws is `failed(err)`.
 */
export async function runController(
  ctx: PassContext,
  def: ControllerDefinition,
  object: KubeObject,
): Promise<ControllerStep> {
  const declaration = def.finalizer;
  const step = finalizerStep(declaration, object);
  switch (step) {
    case "reconcile":
      return { outcome: await reconciled(ctx, def, object), final: false };
    case "skip":
      return { outcome: done(), final: true };
    case "add":
      try {
        const { finalizers } = addFinalizer(object.metadata.finalizers, declaration!.name);
        await patchPrimaryMetadata(ctx.kube, def.for, object, { finalizers });
      } catch (err) {
        return { outcome: failed(err), final: true };
      }
      return { outcome: await reconciled(ctx, def, object), final: false };
    case "cleanup":
    case "release": {
      const cleanup = await guard(() => declaration!.cleanup(ctx, object));
      if (cleanup.kind !== "done")
        return { outcome: await withMetadataWritten(ctx, def, object, cleanup), final: false };
      try {
        const { finalizers } = removeFinalizer(object.metadata.finalizers, declaration!.name);
        await patchPrimaryMetadata(ctx.kube, def.for, object, { ...cleanup.metadata, finalizers });
      } catch (err) {
        return { outcome: failed(err), final: step === "cleanup" };
      }
      if (step === "cleanup") return { outcome: done(), final: true };
      return { outcome: await reconciled(ctx, def, object), final: false };
    }
    default:
      return assertNever(step);
  }
}

/** The controller's reconcile, guarded, with the metadata its Outcome carries written. */
async function reconciled(ctx: PassContext, def: ControllerDefinition, object: KubeObject): Promise<Outcome> {
  return withMetadataWritten(ctx, def, object, await guard(() => def.reconcile(ctx, object)));
}

async function withMetadataWritten(
  ctx: PassContext,
  def: ControllerDefinition,
  object: KubeObject,
  outcome: Outcome,
): Promise<Outcome> {
  const change = outcome.metadata;
  if (!change || (!change.annotations && !change.labels)) return outcome;
  if (!metadataDiffers(object, change)) return outcome;
  try {
    await patchPrimaryMetadata(ctx.kube, def.for, object, change);
  } catch (err) {
    return failed(err);
  }
  return outcome;
}

/** Whether writing `change` would change the object's annotations or labels. */
function metadataDiffers(object: KubeObject, change: OutcomeMetadata): boolean {
  for (const field of ["annotations", "labels"] as const) {
    const stored = object.metadata[field] ?? {};
    for (const [key, value] of Object.entries(change[field] ?? {})) {
      if ((stored[key] ?? null) !== value) return true;
    }
  }
  return false;
}

/** What the runtime writes in a primary's metadata: its finalizers, and what an Outcome carries. */
export interface MetadataChange extends OutcomeMetadata {
  finalizers?: string[];
}

/**
 * Writes `change` to `object`'s metadata with a merge patch guarded by its resourceVersion, then
 * copies the new resourceVersion, finalizers, annotations and labels onto `object`, so the status
 * write that follows is guarded by the right version.
 *
 * Caveats: a concurrent writer makes this throw `ConflictError` (the pass requeues at once and the
 * next recomputes). A whole-list finalizer merge patch is only safe because of that guard: it can
 * neither drop a finalizer another controller added meanwhile nor add one back.
 */
export async function patchPrimaryMetadata(
  kube: Kube,
  res: Resource,
  object: KubeObject,
  change: MetadataChange,
): Promise<void> {
  const metadata: Record<string, unknown> = { ...change };
  if (object.metadata.resourceVersion !== undefined)
    metadata.resourceVersion = object.metadata.resourceVersion;
  const updated = await kube.patch(res, keyOf(object), { type: "merge", body: { metadata } });
  object.metadata.resourceVersion = updated.metadata.resourceVersion;
  for (const field of ["finalizers", "annotations", "labels"] as const) {
    if (updated.metadata[field]) object.metadata[field] = updated.metadata[field] as never;
    else delete object.metadata[field];
  }
}

/**
 * The finalizer of `declaration` added to the object at `key` without reading it first (see
 * `FinalizerDeclaration.addUnread`): one JSON patch that tests the object's UID is `uid` and that
 * it holds no finalizer, answering the object as stored; `undefined` when a test or the API server
 * refuses it (another object of the name, one holding a finalizer, one being deleted, none at all):
 * the caller reads the object instead. A finalizer the object does not `want` is taken off again.
 *
 * Caveats: a missing member tested against `null` passes on the Kubernetes API server (its JSON
 * patch library does so; RFC 6902 would refuse it): where it did not, every such pass would read
 * as before, one refused patch more (test/integration/subpool-converge.test.ts counts it).
 */
export async function addFinalizerUnread(
  kube: Kube,
  res: Resource,
  key: { namespace?: string; name: string },
  uid: string,
  declaration: FinalizerDeclaration,
): Promise<KubeObject | undefined> {
  let object: KubeObject;
  try {
    object = await kube.patch(res, key.namespace ? key : { name: key.name }, {
      type: "json",
      ops: [
        { op: "test", path: "/metadata/uid", value: uid },
        { op: "test", path: "/metadata/finalizers", value: null },
        { op: "test", path: "/metadata/deletionTimestamp", value: null },
        { op: "add", path: "/metadata/finalizers", value: [declaration.name] },
      ],
    });
  } catch (err) {
    if (refusedPrecondition(err)) return undefined;
    throw err;
  }
  if ((declaration.want?.(object) ?? "hold") !== "hold") {
    const { finalizers } = removeFinalizer(object.metadata.finalizers, declaration.name);
    await patchPrimaryMetadata(kube, res, object, { finalizers });
  }
  return object;
}

/** A patch refused for its tests or the object's state, not for a fault: read instead. */
function refusedPrecondition(err: unknown): boolean {
  return (
    err instanceof InvalidError ||
    err instanceof ConflictError ||
    err instanceof ForbiddenError ||
    isNotFound(err)
  );
}

/** `run()`'s Outcome; a throw or a value that is not an Outcome is `failed`. */
export async function guard(run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    const outcome = await run();
    return Outcome.is(outcome) ? outcome : failed(new TypeError("a reconcile must return an Outcome"));
  } catch (err) {
    return failed(err);
  }
}
