/**
 * The Node host in standby (test/e2e/host.ts `spawnStandbyHost`): loads the host's modules, then
 * waits for a line on stdin and runs `functions/node/main.ts` — the same entry point as
 * `npm start`, in a process that has already paid for loading it. Exits if stdin closes first.
 */
import "../../functions/node/config.ts";
import "../../functions/node/host.ts";
import "../../shared/app/telemetry/index.ts";

const go = await new Promise<boolean>((resolve) => {
  process.stdin.once("data", () => resolve(true));
  process.stdin.once("end", () => resolve(false));
});
process.stdin.destroy();
if (!go) process.exit(0);
await import("../../functions/node/main.ts");
