/**
 * The cleanup of the SubPool's finalizer: the derived Namespace goes first, then the runtime
 * removes the finalizer, then the API server the SubPool.
 */

import { assertNever } from "../../guards/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import { ForbiddenError, isControlledBy, isNotFound, Resources } from "../../kube/index.ts";
import type { PassContext } from "../../runtime/index.ts";
import { done, failed, type Outcome, requeueAfter } from "../../runtime/index.ts";
import { SubPoolReason, subPoolNamespaceName } from "./api.ts";
import { type SubPoolStatusWriter, statusWriter } from "./status.ts";
import type { SubPoolTimings } from "./timings.ts";

export interface DeletionObservation {
  /** The derived Namespace as read, or undefined when it does not exist. */
  namespace: KubeObject | undefined;
  /** Whether that Namespace is controlled by the SubPool being deleted (by UID). */
  namespaceIsOurs: boolean;
}

export type DeletionAction =
  /** The Namespace is gone, or was never ours (then it is kept): the finalizer may go. */
  | { kind: "removeFinalizer"; namespaceKept: boolean }
  | { kind: "deleteNamespace" }
  /** Our Namespace is terminating: wait and report why. */
  | { kind: "waitForNamespace" };

/**
 * What a deletion pass does (pure), as the seed orders it: Namespace absent → remove the
 * finalizer; present and ours → delete it and wait until it is gone; present and not ours → keep
 * it and remove the finalizer.
 */
export function decideDeletion(obs: DeletionObservation): DeletionAction {
  if (!obs.namespace) return { kind: "removeFinalizer", namespaceKept: false };
  if (!obs.namespaceIsOurs) return { kind: "removeFinalizer", namespaceKept: true };
  return obs.namespace.metadata.deletionTimestamp
    ? { kind: "waitForNamespace" }
    : { kind: "deleteNamespace" };
}

/**
 * Why a terminating Namespace is still there, from its status conditions
 * (NamespaceContentRemaining, NamespaceFinalizersRemaining, NamespaceDeletionContentFailure, ...).
 */
export function namespaceBlockers(namespace: KubeObject): string {
  const status = namespace.status as
    | { phase?: string; conditions?: { type: string; status: string; message?: string }[] }
    | undefined;
  const reasons = (status?.conditions ?? [])
    .filter((c) => c.status === "True")
    .map((c) => (c.message ? `${c.type}: ${c.message}` : c.type));
  const name = namespace.metadata.name ?? "";
  return reasons.length > 0
    ? `waiting for Namespace ${name} to be deleted: ${reasons.join("; ")}`
    : `waiting for Namespace ${name} to be deleted (phase ${status?.phase ?? "unknown"})`;
}

/**
 * The finalizer's cleanup (a SubPool with a deletionTimestamp): `done()` once the Namespace is gone
 * or was never ours, and the runtime removes the finalizer.
 */
export function cleanupSubPool(
  ctx: PassContext,
  object: KubeObject,
  timings: SubPoolTimings,
): Promise<Outcome> {
  return reconcileDeletion(ctx, object, statusWriter(object, ctx.clock.now()), timings);
}

/** Runs the deletion path for a SubPool with a deletionTimestamp. */
export async function reconcileDeletion(
  ctx: PassContext,
  object: KubeObject,
  status: SubPoolStatusWriter,
  timings: SubPoolTimings,
): Promise<Outcome> {
  const name = object.metadata.name ?? "";
  const nsName = subPoolNamespaceName(name);
  let namespace: KubeObject | undefined;
  try {
    namespace = await ctx.kube.get(Resources.Namespace, { name: nsName });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  const action = decideDeletion({
    namespace,
    namespaceIsOurs: namespace !== undefined && isControlledBy(namespace, object),
  });
  switch (action.kind) {
    case "removeFinalizer":
      if (action.namespaceKept) {
        ctx.log.info("SubPool deleted; its Namespace name is held by another owner and is kept", {
          subpool: name,
          namespace: nsName,
        });
      }
      return done();
    case "deleteNamespace": {
      try {
        await ctx.kube.delete(
          Resources.Namespace,
          { name: nsName },
          { preconditions: { uid: namespace!.metadata.uid! } },
        );
      } catch (err) {
        if (isNotFound(err)) return requeueAfter(0);
        if (err instanceof ForbiddenError) {
          status.ready(
            false,
            SubPoolReason.DeletionBlocked,
            `deleting Namespace ${nsName} was refused: ${err.message}`,
          );
          return failed(err);
        }
        throw err;
      }
      status.ready(
        false,
        SubPoolReason.DeletionBlocked,
        `deleting Namespace ${nsName}; the finalizer stays until it is gone`,
      );
      return requeueAfter(timings.deletionPoll);
    }
    case "waitForNamespace":
      status.ready(false, SubPoolReason.DeletionBlocked, namespaceBlockers(namespace!));
      return requeueAfter(timings.deletionPoll);
    default:
      return assertNever(action);
  }
}
