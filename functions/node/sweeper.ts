import type { Log, SweepLease } from "../../shared/app/index.ts";
import { singleFlight } from "../../shared/concurrency/index.ts";

/**
 * The Node host's cron: one full sweep (every object once) at once, in the background so that
 * the caller can install its shutdown handling, then one every `periodSeconds` (full again until
 * a full one has run: `run` answering `{ heldBack: true }`, or throwing, does not count). Sweeps never
 * overlap (a call while one runs joins it); a failed one is logged. `stop` waits for a sweep in
 * flight.
 *
 * With a `lease` (several replicas), each period first asks it whether this replica owns the
 * period: only the holder sweeps, and so probes. The lease is renewed every period even while a
 * long sweep is still running, and the first sweep a replica runs as holder is its full one (a
 * standby taking over from a replica that died sends every object once, as a restart does).
 * `stop` releases the lease so that a standby takes over at its next period.
 */
export function startSweeper(
  run: (full: boolean) => Promise<unknown>,
  periodSeconds: number,
  log: Log,
  lease?: Pick<SweepLease, "hold" | "release">,
): { sweep(full?: boolean): Promise<void>; stop(): Promise<void> } {
  // The full sweep counts only once it ran: one held back (kubefn's admission policies not yet
  // seen) or failed is tried again at the next period, or objects made meanwhile would wait for
  // the drift period.
  let fullDone = false;
  const sweep = singleFlight(async (full: boolean) => {
    const result = await run(full);
    if (full && (result as { heldBack?: boolean } | undefined)?.heldBack !== true) fullDone = true;
  });
  let holding: Promise<boolean> | undefined;
  const sweepHeld = () => sweep(!fullDone);
  // Without a lease the sweep starts at once (no await before it): the caller's stop sees it.
  const tick = (): Promise<void> => {
    if (!lease) return sweepHeld();
    holding ??= lease.hold().finally(() => {
      holding = undefined;
    });
    return holding.then((held) => (held ? sweepHeld() : undefined));
  };
  const logged = () => void tick().catch((err: unknown) => log.error("sweep failed", { error: String(err) }));
  logged();
  const timer = setInterval(logged, periodSeconds * 1000);
  return {
    sweep: (full = false) => sweep(full),
    async stop() {
      clearInterval(timer);
      await holding?.catch(() => undefined);
      await sweep.running?.catch(() => undefined);
      await lease?.release();
    },
  };
}
