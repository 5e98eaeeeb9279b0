/**
 * Type guards every folder uses: the exhaustiveness check over unions that drive behaviour, and
 * the plain-object check for values read from JSON.
 */

/**
 * Marks the end of an exhaustive `switch` over a union: a new member that is not handled is a
 * type error here, and a value outside the union at run time (bad input cast to the union) throws.
 *
 * @example
 * switch (outcome.kind) { case "done": …; default: return assertNever(outcome.kind); }
 */
export function assertNever(value: never, what = "case"): never {
  throw new TypeError(`unhandled ${what}: ${JSON.stringify(value)}`);
}

/** Whether `value` is a plain JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An error's message, or the thrown value as text. */
export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * A short description of a value no guard accepted, for an error: its type, or `name=value` of
 * the `hints` keys it holds as strings, or else its first keys.
 */
export function describeShape(value: unknown, hints: readonly string[] = []): string {
  if (typeof value !== "object" || value === null) return typeof value;
  const fields = value as Record<string, unknown>;
  const hint = hints.filter((k) => typeof fields[k] === "string").map((k) => `${k}=${fields[k] as string}`);
  return hint.length > 0 ? hint.join(" ") : `keys ${Object.keys(value).slice(0, 8).join(",")}`;
}

/** `text` parsed as JSON, or `undefined` when it is not JSON (an error body, an empty answer). */
export function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
