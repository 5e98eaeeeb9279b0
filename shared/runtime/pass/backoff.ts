/** Retry policy for transient failures, as data. */
export interface BackoffPolicy {
  /** First delay in seconds (attempt 0). Default 1. */
  base?: number;
  /** Growth per attempt. Default 2. */
  factor?: number;
  /** Largest delay before jitter. Default 300. */
  cap?: number;
  /** A server's Retry-After in seconds: the result is never below it (it may exceed `cap`). */
  retryAfter?: number;
  /**
   * "equal" (default): half the step plus a random half, so a retry never comes almost at once.
   * "full": anywhere in [0, step].
   */
  jitter?: "equal" | "full";
}

export const DEFAULT_BACKOFF = { base: 1, factor: 2, cap: 300 } as const;

/**
 * Seconds to wait before retry number `attempt + 1`: step = min(cap, base · factor^attempt),
 * jittered with `random` (in [0, 1)), rounded up to whole seconds (queues delay in seconds), and
 * floored at `retryAfter`. Pure: the attempt travels in the follow-up message.
 *
 * @example
 * backoffSeconds(0, () => 0.5)  // 1: step 1, equal jitter → 0.75, rounded up
 * backoffSeconds(10, () => 0.5) // 225: step capped at 300 → 150 + 75
 */
export function backoffSeconds(attempt: number, random: () => number, policy: BackoffPolicy = {}): number {
  const base = policy.base ?? DEFAULT_BACKOFF.base;
  const factor = policy.factor ?? DEFAULT_BACKOFF.factor;
  const cap = policy.cap ?? DEFAULT_BACKOFF.cap;
  const n = Number.isFinite(attempt) && attempt > 0 ? Math.floor(attempt) : 0;
  const step = Math.min(cap, base * factor ** n);
  const r = Math.min(Math.max(random(), 0), 1);
  const jittered = policy.jitter === "full" ? step * r : step / 2 + (step / 2) * r;
  const seconds = Math.ceil(jittered);
  const floor = policy.retryAfter !== undefined && policy.retryAfter > 0 ? Math.ceil(policy.retryAfter) : 0;
  return Math.max(seconds, floor);
}
