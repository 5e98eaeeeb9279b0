/**
 * Connections per sequential request on the devcluster: the Node transport (its undici keep-alive
 * pool) against the agent client-node builds for the same kubeconfig (`keepAlive: false`, what
 * the transport used before its own keep-alive agent). New TLS connections are counted as the client sockets that
 * complete a handshake (`secureConnect`), by wrapping `TLSSocket#emit` for the measurement only.
 */
import * as https from "node:https";
import * as tls from "node:tls";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { type BenchRow, benchCluster, round } from "./cluster.ts";

const REQUESTS = 200;

/** Runs `send` REQUESTS times in sequence; counts TLS handshakes and the mean time per request. */
async function measure(send: () => Promise<void>): Promise<{ handshakes: number; msPerRequest: number }> {
  let handshakes = 0;
  const original = tls.TLSSocket.prototype.emit;
  tls.TLSSocket.prototype.emit = function (this: tls.TLSSocket, event: string | symbol, ...args: unknown[]) {
    if (event === "secureConnect") handshakes++;
    return original.apply(this, [event, ...args] as Parameters<typeof original>);
  } as typeof original;
  try {
    await send(); // warm-up: the first connection is paid by both
    handshakes = 0;
    const t0 = performance.now();
    for (let i = 0; i < REQUESTS; i++) await send();
    return { handshakes, msPerRequest: round((performance.now() - t0) / REQUESTS, 2) };
  } finally {
    tls.TLSSocket.prototype.emit = original;
  }
}

export async function benchConnections(): Promise<BenchRow[]> {
  const { kc } = await benchCluster();
  const server = kc.getCurrentCluster()!.server;
  const transport = createNodeTransport(kc);
  const reused = await measure(async () => {
    await transport.request({ method: "GET", path: "/api/v1/namespaces/default" });
  });
  const perRequest = await measure(async () => {
    const opts: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    await new Promise<void>((resolve, reject) => {
      const req = https.request(new URL(`${server}/api/v1/namespaces/default`), opts, (res) => {
        res.resume();
        res.on("end", resolve);
      });
      req.on("error", reject);
      req.end();
    });
  });
  return [
    {
      name: "connections (Node transport)",
      figure: reused.handshakes,
      unit: `TLS handshakes / ${REQUESTS} GETs`,
      note: `${reused.msPerRequest} ms per sequential GET; client-node's own agent (keepAlive: false): ${perRequest.handshakes} handshakes, ${perRequest.msPerRequest} ms per GET`,
    },
  ];
}
