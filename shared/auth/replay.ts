/**
 * Refusing replays of relay batches: a valid signature is accepted once within the replay window.
 *
 * The guard is a port so that a deployment with a shared store can plug one in; the default,
 * {@link memoryReplayGuard}, remembers the signatures one process (Node host) or one warm instance
 * (a Worker isolate, a Lambda sandbox) has seen. On the Node host that is complete; on serverless
 * platforms a replay that lands on another instance is not recognised. That is the chosen trade:
 * a shared store would cost a write per batch on the hot path and a new dependency per platform,
 * while a replayed batch can only ask for reconcile passes — idempotent, deduplicated, and bounded
 * by the intake's concurrency limit — and never carries state kubefn trusts (passes read the
 * cluster, not the event). Timestamps in the future are refused outright, so a captured batch is
 * useful for at most the window after it was signed.
 */
export interface ReplayGuard {
  /** Whether `signature` was accepted before and its window has not run out (a replay). */
  seen(signature: string, nowSeconds: number): boolean;
  /**
   * Records `signature` as accepted until `expiresAtSeconds`. Called only once the batch was
   * enqueued: a batch refused for a transient failure (503) may be sent again under the same
   * signature (a relay retry within the same second signs identically).
   */
  remember(signature: string, expiresAtSeconds: number, nowSeconds: number): void;
}

/**
 * A bounded in-memory {@link ReplayGuard}: at most `maxEntries` signatures, expired ones dropped
 * first; when still full, the oldest is forgotten (the window then narrows under a flood).
 */
export function memoryReplayGuard(maxEntries = 10_000): ReplayGuard {
  const expiries = new Map<string, number>();
  return {
    seen(signature, nowSeconds) {
      const known = expiries.get(signature);
      return known !== undefined && known > nowSeconds;
    },
    remember(signature, expiresAtSeconds, nowSeconds) {
      if (expiries.size >= maxEntries) {
        for (const [sig, at] of expiries) if (at <= nowSeconds) expiries.delete(sig);
        while (expiries.size >= maxEntries) {
          const oldest = expiries.keys().next().value;
          if (oldest === undefined) break;
          expiries.delete(oldest);
        }
      }
      expiries.set(signature, expiresAtSeconds);
    },
  };
}
