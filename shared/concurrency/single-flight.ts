/** A function that runs at most once at a time; see {@link singleFlight}. */
export interface SingleFlight<A> {
  (arg: A): Promise<void>;
  /** The run in flight, if any (e.g. for a shutdown to wait on). */
  readonly running: Promise<void> | undefined;
}

/**
 * `run` that never overlaps itself: a call while one runs joins that run (its argument is not
 * used) instead of starting another, as a cron with one slot would.
 */
export function singleFlight<A>(run: (arg: A) => Promise<unknown>): SingleFlight<A> {
  let running: Promise<void> | undefined;
  const call = (arg: A): Promise<void> =>
    (running ??= run(arg)
      .then(() => undefined)
      .finally(() => {
        running = undefined;
      }));
  return Object.defineProperty(call, "running", { get: () => running }) as SingleFlight<A>;
}
