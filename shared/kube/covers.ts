import { isRecord } from "../guards/index.ts";
import { sameQuantity } from "./quantity.ts";

/** Keys whose members are resource quantities ("1" and "1000m" are the same). */
const quantityMaps = new Set(["requests", "limits", "hard"]);

/**
 * Whether `observed` already has everything `desired` says: objects key by key (extra observed
 * keys are server defaults or other systems' fields and do not count), arrays element by element
 * at equal length, quantities by value, other scalars strictly. The "would this write change
 * anything" test that lets a pass skip an apply or a patch, which is a request even when nothing
 * changes.
 *
 * Caveats: a field written before and since dropped from `desired` is not noticed; it goes the
 * next time another field changes.
 */
export function covers(observed: unknown, desired: unknown, parentKey = ""): boolean {
  if (desired === undefined) return true;
  if (Array.isArray(desired)) {
    return (
      Array.isArray(observed) &&
      observed.length === desired.length &&
      desired.every((d, i) => covers(observed[i], d, parentKey))
    );
  }
  if (isRecord(desired)) {
    // A scalar member is judged by the key of the map holding it ("requests", "hard").
    return (
      isRecord(observed) &&
      Object.entries(desired).every(([k, v]) =>
        covers(observed[k], v, isRecord(v) || Array.isArray(v) ? k : parentKey),
      )
    );
  }
  if (quantityMaps.has(parentKey) && isQuantityLike(desired) && isQuantityLike(observed)) {
    return sameQuantity(observed, desired);
  }
  return observed === desired;
}

function isQuantityLike(value: unknown): value is string | number {
  return typeof value === "string" || typeof value === "number";
}
