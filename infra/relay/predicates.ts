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
 * later data change can be told from a label or annotation change.
 *
 * Caveats: the hash of a Secret's data stays in memory only; it is never sent.
 */
export function seenOf(object: KubeObject, payload: boolean): Seen {
  const meta = object.metadata;
  const seen: Seen = { uid: meta.uid ?? "", deleting: meta.deletionTimestamp !== undefined };
  if (meta.generation !== undefined) seen.generation = meta.generation;
  if (payload) {
    const body: Record<string, unknown> = {};
    for (const field of PAYLOAD_FIELDS) if (object[field] !== undefined) body[field] = object[field];
    seen.payloadHash = createHash("sha256").update(canonicalJson(body)).digest("hex").slice(0, 32);
  }
  return seen;
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
 * generation (a Namespace) reaches intake only on create, delete and deletion start; a controller
 * that must react to an owned object's status relies on the sweep for it.
 */
export const specChanges: Predicate = or(created, deleted, replaced, generationChanged, deletionStarted);

/** Watched configuration kinds (ConfigMap, Secret): create, delete, a payload change. */
export const payloadChanges: Predicate = or(created, deleted, replaced, payloadChanged, deletionStarted);
