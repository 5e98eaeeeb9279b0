/** How long the SubPool controller waits before its next look, in seconds. */
export interface SubPoolTimings {
  /**
   * While a pool is active (not suspended, not deleting): the shared Gateway and the proxy
   * gateway's EndpointSlices are owned by nobody, so no owned-object event reports their changes.
   */
  activeRequeue?: number;
  /** While the derived Namespace is being deleted, or is terminating under an active pool. */
  deletionPoll: number;
  /**
   * While an active pool waits to become Ready (its StatefulSet's Pod, the proxy gateway, its
   * route): the first look after this many seconds, then after as long as it has waited, until
   * that reaches the resync and the sweep takes over. The fallback only: its StatefulSet's status
   * writes bring a look as they happen (intake, `readinessFrom`), so this catches what an event
   * path lost or does not carry (the proxy gateway, a route's acceptance).
   */
  waitingFirst?: number;
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
  waitingFirst: 15,
  resync: 60,
};

/** The follow-up reason of a waiting look: that pass reads readiness alone (see reconcile.ts). */
export const waitingLookReason = "waiting";

/** The reasons of an active pool waiting on others' progress (not an error, not a conflict). */
const waitingReasons: ReadonlySet<string> = new Set([
  "StatefulSetNotReady",
  "ProxyGatewayNotReady",
  "RouteNotReady",
]);

/**
 * When to look again at an active pool whose Ready is False for `reason` since `since` (pure):
 * `waitingFirst` seconds after it started waiting, then as long as it has waited — 15, 15, 30 s —
 * and undefined (the sweep) once that reaches the resync or the pool is not waiting. Bounded: a
 * pool that never becomes ready costs 3 looks over a minute (each a follow-up with reason
 * {@link waitingLookReason}: three or four reads, see reconcile.ts), then the sweep's looks, ever
 * rarer (drift.ts `waitingLookDue`). A fallback: the StatefulSet's status writes bring their looks
 * as they happen.
 *
 * Regression (issue 33): it looked after 2 s, then half the time waited (11 looks over three
 * minutes), because no event carried the StatefulSet's readiness; the fleet bench counted 2.2 of
 * them per pool while converging.
 */
export function waitingLook(
  timings: SubPoolTimings,
  ready: { status: string; reason: string },
  waitedSeconds: number,
): number | undefined {
  if (timings.waitingFirst === undefined || ready.status === "True" || !waitingReasons.has(ready.reason))
    return undefined;
  const after = Math.max(timings.waitingFirst, Math.ceil(waitedSeconds));
  return after < timings.resync ? after : undefined;
}
