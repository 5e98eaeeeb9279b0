/**
 * A local HTTP forward proxy (absolute-form GET and CONNECT) plus, optionally, a target that
 * answers 200: enough for a Proxy in the devcluster to turn Ready.
 *
 *   node --import tsx scripts/forward-proxy.ts [--listen 127.0.0.1:3128] [--target 127.0.0.1:8081]
 *
 * Managed Proxies on the devcluster get a Pod IP in 127.0.0.0/8 and listen on port 3128: run this
 * with `--listen <podIP>:3128` to play the proxy inside that Pod.
 */
import { startForwardProxy, startHttpTarget } from "../test/support/probe-fixtures.ts";

function hostPort(flag: string, fallback: string | undefined): { host: string; port: number } | undefined {
  const i = process.argv.indexOf(flag);
  const value = i >= 0 ? process.argv[i + 1] : fallback;
  if (!value) return undefined;
  const m = /^(.+):(\d+)$/.exec(value);
  if (!m) throw new Error(`${flag} wants host:port, got ${value}`);
  return { host: m[1]!, port: Number(m[2]) };
}

const listen = hostPort("--listen", "127.0.0.1:3128")!;
const target = hostPort("--target", undefined);
// Counters only: a long-running proxy keeps no list of what it forwarded.
const proxy = await startForwardProxy({ ...listen, record: false });
console.log(`forward proxy on ${listen.host}:${proxy.port}`);
if (target) {
  const t = await startHttpTarget(target);
  console.log(`target answering 200 on http://${target.host}:${t.port}/`);
}
