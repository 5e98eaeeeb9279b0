/**
 * Event predicates for the intake, as controller-runtime's `predicate` package has them, judged
 * from what one event carries: the verb, the object after the write (audit `responseObject`, a
 * relay event's object) and what the writer sent (audit `requestObject`: an update's whole body,
 * which still holds the generation the writer read, or a patch). Pure.
 *
 * An event that carries too little to judge (audit `Metadata` level, a relay event, which the
 * relay has already filtered at the edge) passes: a predicate only ever drops what it can show is
 * noise. Dropping is safe either way — every message is an optimisation; the sweep revisits.
 */

import { isRecord } from "../../guards/index.ts";
import type { WatchedChange } from "./controller.ts";

/** The fields of a change a predicate reads. */
export type PredicateInput = Pick<WatchedChange, "verb" | "object" | "request">;

/** A pure filter on one change; true keeps it. Compose with {@link anyOf}. */
export type ChangePredicate = (change: PredicateInput) => boolean;

/**
 * The seed's primary predicate: create and delete (a delete is also where `deletionTimestamp`
 * first appears), and an update only when `metadata.generation` changed — i.e. the spec. Status
 * writes through the main resource and label-, annotation- or finalizer-only writes are dropped.
 *
 * - update: the body's generation (what the writer read) against the response's.
 * - patch: a patch that touches nothing but `metadata` cannot change the generation.
 */
export const generationChanged: ChangePredicate = (change) => {
  if (change.verb === "create" || change.verb === "delete") return true;
  if (change.verb === "update") {
    if (unchangedWrite(change)) return false;
    const before = generationOf(change.request);
    const after = generationOf(change.object);
    return before === undefined || after === undefined || before !== after;
  }
  return !patchTouchesOnly(change.request, isMetadataPath);
};

/**
 * A ConfigMap predicate (the seed's `ManagedConfigPredicate` / `ConfigMapPayloadChanged`):
 * create and delete, and writes that may change `data` or `binaryData`. A patch touching only
 * `metadata` and a PUT the API server answered with the resourceVersion it was sent (nothing
 * changed) are dropped.
 *
 * Caveats: any other update passes: an audit event holds the payload after the write, never the
 * one before it.
 */
export const payloadChanged: ChangePredicate = (change) => {
  if (change.verb === "create" || change.verb === "delete") return true;
  if (change.verb === "update") return !unchangedWrite(change);
  return !patchTouchesOnly(change.request, isMetadataPath);
};

/** True when any of `predicates` keeps the change. */
export function anyOf(...predicates: ChangePredicate[]): ChangePredicate {
  return (change) => predicates.some((p) => p(change));
}

function isMetadataPath(path: readonly string[]): boolean {
  return path[0] === "metadata" && path[1] !== "deletionTimestamp";
}

/**
 * Whether `patch` (a merge, strategic-merge or apply body, or a JSON-patch op list) changes only
 * paths `allowed` accepts. Anything unreadable is "no".
 */
function patchTouchesOnly(patch: unknown, allowed: (path: readonly string[]) => boolean): boolean {
  if (Array.isArray(patch)) {
    if (patch.length === 0) return false;
    return patch.every((op) => {
      if (!isRecord(op) || typeof op.path !== "string") return false;
      const path = op.path.split("/").slice(1);
      const from = typeof op.from === "string" ? op.from.split("/").slice(1) : undefined;
      return allowed(path) && (from === undefined || allowed(from));
    });
  }
  if (!isRecord(patch)) return false;
  const keys = Object.keys(patch).filter((k) => k !== "apiVersion" && k !== "kind");
  if (keys.length === 0) return false;
  return keys.every((k) => {
    if (k !== "metadata") return allowed([k]);
    const metadata = patch.metadata;
    if (!isRecord(metadata)) return false;
    return Object.keys(metadata).every((m) => allowed(["metadata", m]));
  });
}

function generationOf(value: unknown): number | undefined {
  if (!isRecord(value) || !isRecord(value.metadata)) return undefined;
  const g = value.metadata.generation;
  return typeof g === "number" ? g : undefined;
}

/** A PUT answered with the resourceVersion it carried: the API server stored nothing new. */
function unchangedWrite(change: PredicateInput): boolean {
  const sent = resourceVersionOf(change.request);
  return sent !== undefined && sent === resourceVersionOf(change.object);
}

function resourceVersionOf(value: unknown): string | undefined {
  if (!isRecord(value) || !isRecord(value.metadata)) return undefined;
  const rv = value.metadata.resourceVersion;
  return typeof rv === "string" && rv !== "" ? rv : undefined;
}
