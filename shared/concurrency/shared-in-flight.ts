/**
 * `run` shared by the calls made while it is in flight, for at most `maxAgeMs` (as
 * {@link singleFlight} shares a run, with an age bound): a call after that starts a run of its
 * own, and the older one, if it ever settles, is let go.
 *
 * Why the bound: on Workers an isolate outlives its invocations, and a promise an invocation
 * started may never settle once the platform cut that invocation off (its time was up, its
 * client left): its fetch, and the timer that would have aborted it, go with it. Unbounded, one
 * such promise would hold every later caller in the isolate for its whole life (a token never
 * renewed, a gate never opened). `maxAgeMs` is the longest a healthy run can take: its own
 * deadlines, and a little more.
 *
 * Caveats: a call that joined a run before it was given up waits on that run still; only later
 * calls start afresh. A run slower than `maxAgeMs` is not cancelled: two may be in flight.
 */
export function sharedInFlight<T>(
  run: () => Promise<T>,
  maxAgeMs: number,
  now: () => number,
): () => Promise<T> {
  let current: { promise: Promise<T>; startedAt: number } | undefined;
  return () => {
    if (current && now() - current.startedAt < maxAgeMs) return current.promise;
    const promise: Promise<T> = run().finally(() => {
      if (current?.promise === promise) current = undefined;
    });
    current = { promise, startedAt: now() };
    return promise;
  };
}
