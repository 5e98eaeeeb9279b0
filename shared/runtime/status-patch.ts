/**
 * Deep equality of JSON values, ignoring object key order. `undefined`-valued keys count as
 * absent, as they do once serialised.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const aKeys = Object.keys(ao).filter((k) => ao[k] !== undefined);
  const bCount = Object.keys(bo).filter((k) => bo[k] !== undefined).length;
  if (aKeys.length !== bCount) return false;
  for (const k of aKeys) if (!(k in bo) || !jsonEqual(ao[k], bo[k])) return false;
  return true;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The JSON merge patch (RFC 7386) that turns `before` into `after`: changed keys with their new
 * value, removed keys as `null`, arrays replaced whole. `undefined` when they are equal.
 *
 * @example
 * mergePatchFor({ ip: "10.0.0.1", phase: "Ready" }, { phase: "Failed" }) // { ip: null, phase: "Failed" }
 */
export function mergePatchFor(before: unknown, after: unknown): unknown {
  if (jsonEqual(before, after)) return undefined;
  if (!isPlainObject(before) || !isPlainObject(after)) return after === undefined ? null : after;
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(before)) {
    if (before[key] !== undefined && after[key] === undefined) patch[key] = null;
  }
  for (const key of Object.keys(after)) {
    if (after[key] === undefined) continue;
    const sub = mergePatchFor(before[key], after[key]);
    if (sub !== undefined) patch[key] = sub;
  }
  return patch;
}
