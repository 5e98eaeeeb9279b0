/**
 * Probe fixtures in their own process, so the sweep bench's CPU figures are the sweep's alone:
 * `count` forward proxies and one HTTP target on 127.0.0.1. Prints one JSON line with the ports,
 * then serves until stdin closes or SIGTERM.
 *
 * Usage: node --import tsx test/bench/fixtures-server.ts [count]
 */
import { startForwardProxies, startHttpTarget } from "../support/probe-fixtures.ts";

const count = Number(process.argv[2] ?? 4);
const target = await startHttpTarget();
const proxies = await startForwardProxies(count, { record: false });
console.log(JSON.stringify({ target: target.port, proxies: proxies.ports }));

let closing = false;
const close = async () => {
  if (closing) return;
  closing = true;
  await Promise.all([target.close(), proxies.close()]);
  process.exit(0);
};
process.stdin.on("end", close).resume();
process.on("SIGTERM", close);
