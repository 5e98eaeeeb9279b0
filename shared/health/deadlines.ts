/**
 * Many probe deadlines on one timer. Every probe has two: its own timeout, where the prober gives
 * up and closes its sockets, and `boundedProber`'s backstop a little later, for a prober that does
 * not. With a `setTimeout` and a `clearTimeout` for each, arming and disarming timers was about a
 * twentieth of the Worker's work per probe (`npm run bench -- workerd-profile`); almost every
 * deadline is cancelled long before it is due, so here a deadline is an entry in a set and one
 * timer waits for the earliest.
 */

/**
 * Calls `expire` once `ms` have passed, unless the returned cancel is called first; the
 * `setTimeout` of a prober (see `Prober.probe`).
 */
export type ProbeTimer = (ms: number, expire: () => void) => () => void;

/** One `setTimeout` a probe: what a prober uses when its caller gives it no timer. */
export const ownTimer: ProbeTimer = (ms, expire) => {
  const timer = setTimeout(expire, ms);
  return () => clearTimeout(timer);
};

interface Deadline {
  at: number;
  expire: () => void;
}

/**
 * A {@link ProbeTimer} whose deadlines share one `setTimeout`, armed for the earliest. A cancel
 * removes its deadline from the set only (the timer is cleared once the set is empty); when the
 * timer fires it calls what is due and arms itself for the earliest left. With probes of one
 * timeout it fires about once a timeout, not twice a probe.
 *
 * Caveats: on Workers a timer belongs to the invocation that armed it (workerd cancels an
 * invocation waiting for another's promise), so each invocation needs its own: build one per
 * `boundedProber`, whose slots are the invocation's there. A deadline is never early; it may be
 * late by as long as the event loop is busy, as a `setTimeout` is.
 */
export function sharedTimer(): ProbeTimer {
  const pending = new Set<Deadline>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let armedFor = Number.POSITIVE_INFINITY;
  const armTimer = (at: number) => {
    clearTimeout(timer);
    armedFor = at;
    timer = setTimeout(fireDue, Math.max(0, at - Date.now()));
  };
  const disarmTimer = () => {
    clearTimeout(timer);
    timer = undefined;
    armedFor = Number.POSITIVE_INFINITY;
  };
  function fireDue() {
    timer = undefined;
    armedFor = Number.POSITIVE_INFINITY;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const d of pending) {
      if (d.at <= now) {
        pending.delete(d);
        d.expire();
      } else if (d.at < next) next = d.at;
    }
    // An `expire` may have armed the timer for a deadline of its own, since met in this loop.
    if (pending.size === 0) disarmTimer();
    else if (next < armedFor) armTimer(next);
  }
  const addDeadline: ProbeTimer = (ms, expire) => {
    const deadline: Deadline = { at: Date.now() + Math.max(0, ms), expire };
    pending.add(deadline);
    if (deadline.at < armedFor) armTimer(deadline.at);
    return () => {
      if (pending.delete(deadline) && pending.size === 0) disarmTimer();
    };
  };
  return addDeadline;
}
