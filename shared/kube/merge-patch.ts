import { isRecord } from "../guards/index.ts";
import { canonicalJson } from "./spec-hash.ts";

/** A JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything else replaces. */
export type MergePatch = Record<string, unknown>;

type JsonObject = Record<string, unknown>;

/** Equality of JSON data, independent of key order; `undefined` members count as absent. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** Applies `patch` to `target` as RFC 7386 says, returning a new value; `target` is not modified. */
export function applyMergePatch<T>(target: T, patch: unknown): T {
  if (!isRecord(patch)) return patch as T;
  const out: JsonObject = isRecord(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (value !== undefined) out[key] = applyMergePatch(out[key], value);
  }
  return out as T;
}

/**
 * The merge patch that turns `observed` into `desired`, or undefined when they are equal.
 * Objects are diffed key by key (keys only in `observed` become `null`); arrays and scalars are
 * replaced whole.
 *
 * Caveats: a merge patch cannot set a value to `null`; a `null` or missing `desired` deletes.
 */
export function diffMergePatch(observed: unknown, desired: unknown): unknown {
  if (jsonEqual(observed, desired)) return undefined;
  if (desired === undefined || desired === null) return null;
  if (!isRecord(observed) || !isRecord(desired)) return desired;
  const patch: JsonObject = {};
  for (const key of new Set([...Object.keys(observed), ...Object.keys(desired)])) {
    const sub = diffMergePatch(observed[key], desired[key]);
    if (sub !== undefined) patch[key] = sub;
  }
  return patch;
}

/** The value at `path` (keys from the root) inside nested objects; undefined where one is missing. */
export function valueAt(obj: unknown, path: readonly string[]): unknown {
  let current = obj;
  for (const segment of path) {
    if (!isRecord(current)) return undefined;
    current = current[segment];
  }
  return current;
}

/**
 * A merge patch making each dotted path of `observed` equal to the same path of `desired` —
 * replaced whole, so stale keys under a path are removed — and leaving every other field alone;
 * or null when they already match. The usual `ownedFields` of `ensureObject`.
 *
 * @example
 * // A Service: sync type, ports and selector; keep clusterIP and the other defaulted fields.
 * ownedFields: (observed, desired) => fieldsPatch(observed, desired, ["spec.type", "spec.ports", "spec.selector"])
 *
 * Caveats: the API server fills defaults inside fields you own (a Service port's `protocol` and
 * `targetPort`); give them in `desired` too, or every pass sees drift.
 */
export function fieldsPatch(
  observed: unknown,
  desired: unknown,
  paths: readonly string[],
): MergePatch | null {
  let patch: MergePatch | null = null;
  for (const dotted of paths) {
    const path = dotted.split(".");
    const sub = diffMergePatch(valueAt(observed, path), valueAt(desired, path));
    if (sub === undefined) continue;
    patch ??= {};
    let node: JsonObject = patch;
    for (const segment of path.slice(0, -1)) {
      const next = node[segment];
      if (isRecord(next)) {
        node = next;
      } else {
        const created: JsonObject = {};
        node[segment] = created;
        node = created;
      }
    }
    node[path[path.length - 1]!] = sub;
  }
  return patch;
}
