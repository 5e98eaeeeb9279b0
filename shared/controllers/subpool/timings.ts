/** How long the SubPool controller waits before its next look, in seconds. */
export interface SubPoolTimings {
  /**
   * While a pool is active (not suspended, not deleting): the shared Gateway and the proxy
   * gateway's EndpointSlices are owned by nobody, so no owned-object event reports their changes.
   */
  activeRequeue?: number;
  /** While the derived Namespace is being deleted, or is terminating under an active pool. */
  deletionPoll: number;
  /** After a conflict (foreign Namespace, Secret or object): someone may remove it. */
  conflictRetry?: number;
  /** The drift interval: the sweep revisits every SubPool at least this often (≥ 60). */
  resync: number;
}

/**
 * The seed re-checks an active pool every 30 s. Here the sweep does it: the resync is one minute
 * (the sweep's own period) and the active and conflict looks are unset, so a pass ends with
 * `awaitSweep()` and sends no follow-up (a follow-up chain per drift pass would pile up on a
 * serverless queue, where nothing coalesces them).
 */
export const defaultSubPoolTimings: SubPoolTimings = {
  deletionPoll: 5,
  resync: 60,
};
