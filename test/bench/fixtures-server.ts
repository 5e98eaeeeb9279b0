/**
 * Probe fixtures in their own process, so the sweep bench's CPU figures are the sweep's alone:
 * `count` forward proxies and one HTTP target on 127.0.0.1. Prints one JSON line with the ports,
 * then serves until stdin closes or SIGTERM; each line `hits` on stdin is answered with one line
 * `{"hits":n}`, the requests the target has answered so far.
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
let input = "";
process.stdin
  .setEncoding("utf8")
  .on("data", (c: string) => {
    input += c;
    for (let nl = input.indexOf("\n"); nl >= 0; nl = input.indexOf("\n")) {
      if (input.slice(0, nl).trim() === "hits") console.log(JSON.stringify({ hits: target.hits }));
      input = input.slice(nl + 1);
    }
  })
  .on("end", close);
process.on("SIGTERM", close);
