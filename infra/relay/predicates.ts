import { createHash } from "node:crypto";
import type { KubeObject } from "../../shared/kube/index.ts";
import { canonicalJson } from "../../shared/kube/index.ts";

/**
 * What the relay remembers of an object between events: enough to judge the next edge, and small
 * (a few dozen bytes per key), so memory stays bounded by the number of watched objects, not by
 * their size.
 */
export interface Seen {
  uid: string;
  /** `metadata.generation`; absent on kinds without one (ConfigMap, Secret, Namespace). */
  generation?: number;
  /** `metadata.deletionTimestamp` is set. */
  deleting: boolean;
  /** SHA-256 (hex, first 32 digits) of `data`/`stringData`/`binaryData`; only for payload kinds. */
  payloadHash?: string;
  /** What the status says of readiness ({@link readinessOf}); only for readiness kinds. */
  readiness?: string;
}

/**
 * One change as a predicate judges it, after controller-runtime's CreateEvent / UpdateEvent /
 * DeleteEvent. `old` is what the relay last saw of the key, never a full object.
 */
export type Edge =
  | { type: "create"; seen: Seen }
  | { type: "update"; old: Seen; seen: Seen }
  | { type: "delete"; seen: Seen };

/** Pure: whether an edge is worth an event. Compose with {@link and}, {@link or}, {@link not}. */
export type Predicate = (edge: Edge) => boolean;

/** The fields whose change a configuration object's consumers care about. */
const PAYLOAD_FIELDS = ["data", "stringData", "binaryData"] as const;

/**
 * What the relay keeps of `object`. With `payload`, the configuration payload is hashed so that a
 * later data change can be told from a label or annotation change; with `readiness`, what its
 * status says of readiness is kept ({@link readinessOf}).
 *
 * Caveats: the hash of a Secret's data stays in memory only; it is never sent.
 */
export function seenOf(object: KubeObject, payload: boolean, readiness = false): Seen {
  const meta = object.metadata;
  const seen: Seen = { uid: meta.uid ?? "", deleting: meta.deletionTimestamp !== undefined };
  if (meta.generation !== undefined) seen.generation = meta.generation;
  if (readiness) seen.readiness = readinessOf(object);
  if (payload) {
    const body: Record<string, unknown> = {};
    for (const field of PAYLOAD_FIELDS) if (object[field] !== undefined) body[field] = object[field];
    seen.payloadHash = createHash("sha256").update(canonicalJson(body)).digest("hex").slice(0, 32);
  }
  return seen;
}

/** The status fields a workload's readiness is read from (kstatus's, for the apps kinds). */
const READINESS_COUNTS = [
  "observedGeneration",
  "replicas",
  "readyReplicas",
  "availableReplicas",
  "updatedReplicas",
] as const;

/**
 * What `object`'s status says of readiness, small enough to keep per object: its replica counts
 * and observed generation, and the status of each condition (e.g. `0/1/1/1/1|Available=True`).
 * The status fields that change without readiness changing (timestamps, messages, collision
 * counts) are left out, so a status write that moves only those makes no edge.
 */
export function readinessOf(object: KubeObject): string {
  const status = (object.status ?? {}) as Record<string, unknown>;
  const counts = READINESS_COUNTS.map((field) => {
    const value = status[field];
    return typeof value === "number" ? String(value) : "";
  });
  const conditions = Array.isArray(status.conditions)
    ? (status.conditions as { type?: unknown; status?: unknown; reason?: unknown }[])
        .filter((c) => typeof c?.type === "string")
        .map(
          (c) =>
            `${String(c.type)}=${String(c.status)}${c.type === "Progressing" ? `/${String(c.reason)}` : ""}`,
        )
        .sort()
    : [];
  return `${counts.join("/")}|${conditions.join(",")}`;
}

/** Any create. */
export const created: Predicate = (edge) => edge.type === "create";

/** Any delete. */
export const deleted: Predicate = (edge) => edge.type === "delete";

/** An update that changed `metadata.generation` (the spec, for kinds that have one). */
export const generationChanged: Predicate = (edge) =>
  edge.type === "update" && edge.old.generation !== edge.seen.generation;

/** An update that set `deletionTimestamp`: finalizers are about to run. */
export const deletionStarted: Predicate = (edge) =>
  edge.type === "update" && !edge.old.deleting && edge.seen.deleting;

/** An update that changed the hashed payload (`data`, `stringData`, `binaryData`). */
export const payloadChanged: Predicate = (edge) =>
  edge.type === "update" && edge.old.payloadHash !== edge.seen.payloadHash;

/** An update that changed what the status says of readiness ({@link readinessOf}). */
export const readinessChanged: Predicate = (edge) =>
  edge.type === "update" && edge.old.readiness !== edge.seen.readiness;

/**
 * An update whose object has another UID than the one last seen: it was deleted and recreated
 * while the relay was not watching (a relist after 410 Gone finds this).
 */
export const replaced: Predicate = (edge) => edge.type === "update" && edge.old.uid !== edge.seen.uid;

/** True when every predicate is (true for none). */
export function and(...predicates: Predicate[]): Predicate {
  return (edge) => predicates.every((p) => p(edge));
}

/** True when any predicate is (false for none). */
export function or(...predicates: Predicate[]): Predicate {
  return (edge) => predicates.some((p) => p(edge));
}

export function not(predicate: Predicate): Predicate {
  return (edge) => !predicate(edge);
}

/**
 * Primary and owned kinds: create, delete, a spec change, the start of a deletion.
 *
 * Caveats: status-only and metadata-only writes are dropped, so an owned kind without a
 * generation (a Namespace) reaches intake only on create, delete and deletion start; an owned
 * kind a controller takes readiness from is watched with {@link readinessChanges} instead.
 */
export const specChanges: Predicate = or(created, deleted, replaced, generationChanged, deletionStarted);

/** Watched configuration kinds (ConfigMap, Secret): create, delete, a payload change. */
export const payloadChanges: Predicate = or(created, deleted, replaced, payloadChanged, deletionStarted);

/**
 * Owned kinds a controller takes readiness from (`readinessFrom`: a StatefulSet, a Deployment):
 * {@link specChanges}, and a status write that changed what it says of readiness.
 */
export const readinessChanges: Predicate = or(specChanges, readinessChanged);
