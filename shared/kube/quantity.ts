/**
 * Kubernetes resource quantities ("500m", "1Gi", `2`): their syntax, as the upstream CRDs
 * (controller-gen) publish it for schemas, and their value in milli-units (like
 * `Quantity.MilliValue()`, rounded up) for sums and for telling "1" and "1000m" apart from drift.
 */

/** resource.Quantity's serialization, as the upstream CRDs (controller-gen) publish it. */
export const quantityPattern =
  /^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;

const quantity =
  /^([+-]?)((?:[0-9]+(?:\.[0-9]*)?)|(?:\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$/;

const suffixFactor: Record<string, number> = {
  "": 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/**
 * The milli-value of a quantity ("500m" → 500, "1" → 1000, "1Gi" → 1073741824000), or undefined
 * when `value` is not a quantity.
 *
 * Caveats: a double, so exact only up to 2^53 milli-units (about 9 PB); enough for requests.
 */
export function milliValue(value: string | number): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? Math.ceil(value * 1000) : undefined;
  const match = quantity.exec(value.trim());
  if (!match) return undefined;
  const [, sign, digits, suffix = ""] = match;
  const factor = /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : suffixFactor[suffix];
  if (factor === undefined) return undefined;
  const milli = Math.ceil(Number(digits) * factor * 1000 - 1e-6);
  return milli === 0 ? 0 : sign === "-" ? -milli : milli;
}

/** Whether two quantities denote the same amount ("1" and "1000m"; "1Gi" and "1073741824"). */
export function sameQuantity(a: string | number, b: string | number): boolean {
  if (a === b) return true;
  const x = milliValue(a);
  const y = milliValue(b);
  return x !== undefined && x === y;
}
