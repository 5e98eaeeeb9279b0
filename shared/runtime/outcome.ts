/**
 * What happens after a pass. Build it only with the named constructors; the executor turns it
 * into at most one follow-up message.
 */
export type Outcome =
  | { readonly kind: "done" }
  | { readonly kind: "requeue"; readonly afterSeconds: number }
  | { readonly kind: "error"; readonly error: unknown };

/** Nothing more to do until something changes (or the drift interval passes). */
export function done(): Outcome {
  return { kind: "done" };
}

/** Run again after `seconds` (0 = as soon as possible). */
export function requeueAfter(seconds: number): Outcome {
  return { kind: "requeue", afterSeconds: Math.max(0, seconds) };
}

/** The pass failed; the executor classifies `error` once and decides on retry. */
export function failed(error: unknown): Outcome {
  return { kind: "error", error };
}

export const Outcome = { done, requeueAfter, failed } as const;
