/**
 * Refusing replays of relay batches: a valid signature is accepted once within the replay window.
 *
 * The guard is a port so that a deployment with a shared store can plug one in; the default,
 * {@link memoryReplayGuard}, remembers the signatures one process (Node host) or one warm instance
 * (a Worker isolate, a Lambda sandbox) has seen. On a single Node host that is complete; on
 * serverless platforms, and across Node-host replicas, a replay that lands on another instance is
 * not recognised. That is the chosen trade
 * (docs/security-notes/replay.md): a shared store would cost a write per batch on the hot path and
 * a new dependency per platform, while a replayed batch can only ask for reconcile passes —
 * idempotent, deduplicated, and bounded by the intake's concurrency limit — and never carries
 * state kubefn trusts (passes read the cluster, not the event). Timestamps in the future are
 * refused outright, so a captured batch is useful for at most the window after it was signed.
 *
 * Check and record are one step ({@link ReplayGuard.claim}): two copies of one batch arriving
 * together cannot both pass the check before either is recorded.
 */
export interface ReplayGuard {
  /**
   * Checks `signature` and, when it is new, holds it in the same step:
   * - `claimed`: new; held until {@link confirm} (accepted) or {@link release} (not accepted);
   * - `pending`: another request holds it right now (answer "retry": it may yet fail);
   * - `replayed`: accepted before, and its window has not run out.
   */
  claim(signature: string, expiresAtSeconds: number, nowSeconds: number): ReplayClaim;
  /** The claimed batch was enqueued: `signature` is a replay until its expiry. */
  confirm(signature: string): void;
  /**
   * The claimed batch was not accepted (a transient failure, a malformed body): forget the claim,
   * so the same signature may be sent again (a relay retry within the same second signs
   * identically). A confirmed signature stays.
   */
  release(signature: string): void;
}

export type ReplayClaim = "claimed" | "pending" | "replayed";

/**
 * A bounded in-memory {@link ReplayGuard}: at most `maxEntries` signatures, expired ones dropped
 * first; when still full, the oldest is forgotten (the window then narrows under a flood).
 * Each call runs to completion without awaiting, so within one instance a claim is atomic.
 */
export function memoryReplayGuard(maxEntries = 10_000): ReplayGuard {
  const entries = new Map<string, { expiresAt: number; confirmed: boolean }>();
  return {
    claim(signature, expiresAtSeconds, nowSeconds) {
      const known = entries.get(signature);
      if (known && known.expiresAt > nowSeconds) return known.confirmed ? "replayed" : "pending";
      if (entries.size >= maxEntries) {
        for (const [sig, e] of entries) if (e.expiresAt <= nowSeconds) entries.delete(sig);
        while (entries.size >= maxEntries) {
          const oldest = entries.keys().next().value;
          if (oldest === undefined) break;
          entries.delete(oldest);
        }
      }
      entries.set(signature, { expiresAt: expiresAtSeconds, confirmed: false });
      return "claimed";
    },
    confirm(signature) {
      const known = entries.get(signature);
      if (known) known.confirmed = true;
    },
    release(signature) {
      if (entries.get(signature)?.confirmed === false) entries.delete(signature);
    },
  };
}
