import { singleFlight } from "../../shared/concurrency/index.ts";
import type { Log } from "../../shared/runtime/index.ts";

/**
 * The Node host's cron: one full sweep (every object once) at once, in the background so that
 * the caller can install its shutdown handling, then one every `periodSeconds`. Sweeps never
 * overlap (a call while one runs joins it); a failed one is logged. `stop` waits for a sweep in
 * flight.
 */
export function startSweeper(
  run: (full: boolean) => Promise<unknown>,
  periodSeconds: number,
  log: Log,
): { sweep(full?: boolean): Promise<void>; stop(): Promise<void> } {
  const sweep = singleFlight(run);
  const logged = (full: boolean) =>
    void sweep(full).catch((err: unknown) => log.error("sweep failed", { error: String(err) }));
  logged(true);
  const timer = setInterval(() => logged(false), periodSeconds * 1000);
  return {
    sweep: (full = false) => sweep(full),
    async stop() {
      clearInterval(timer);
      await sweep.running?.catch(() => undefined);
    },
  };
}
