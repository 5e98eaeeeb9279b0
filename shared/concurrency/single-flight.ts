/**
 * `run` that never overlaps itself: a call while one runs returns at once, without running (a
 * periodic caller's next tick catches up), as a cron with one slot would.
 */
export function singleFlight<A>(run: (arg: A) => Promise<unknown>): (arg: A) => Promise<void> {
  let running = false;
  return async (arg: A) => {
    if (running) return;
    running = true;
    try {
      await run(arg);
    } finally {
      running = false;
    }
  };
}
