/**
 * The load generator of the intake bench, run as its own process (`intake.ts` spawns it) so that
 * the host's figures are not paid for by the client. Posts pre-signed relay batches over
 * `concurrency` keep-alive connections for `durationMs` (after a warm-up) or until `maxRequests`,
 * to a loopback URL only, and prints one JSON line with the counts and latencies.
 *
 * Input: the JSON of {@link LoadConfig} in the environment variable KUBEFN_BENCH_LOAD. The batches
 * (relay events for Proxies named `missing-<n>`) are built and signed here, before the clock starts.
 */
import http from "node:http";
import { signBatch } from "../../shared/auth/index.ts";

export interface LoadConfig {
  url: string;
  secret: string;
  concurrency: number;
  warmupRequests: number;
  durationMs: number;
  maxRequests: number;
  /** Events per batch; each names a Proxy in `namespace` (names cycle over `names`). */
  batchSize: number;
  names: number;
  namespace: string;
}

export interface LoadResult {
  requests: number;
  accepted: number;
  failed: number;
  wallMs: number;
  p50Ms: number;
  p99Ms: number;
  enqueued: number;
  clientCpuMs: number;
}

const config = JSON.parse(process.env.KUBEFN_BENCH_LOAD ?? "{}") as LoadConfig;
const target = new URL(config.url);
if (!["127.0.0.1", "localhost", "[::1]"].includes(target.hostname)) {
  throw new Error(`intake-load posts to loopback only, not ${target.hostname}`);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: config.concurrency });
const bodies: string[] = [];
for (let b = 0; b < config.names / config.batchSize; b++) {
  const events = Array.from({ length: config.batchSize }, (_, i) => ({
    type: "MODIFIED",
    resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" },
    object: {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: config.namespace, name: `missing-${b * config.batchSize + i}`, generation: 2 },
    },
  }));
  bodies.push(JSON.stringify({ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events }));
}
const now = Date.now() / 1000;
const signed = await Promise.all(
  bodies.map(async (body) => ({ body, headers: await signBatch(config.secret, body, now) })),
);

function post(i: number): Promise<{ status: number; enqueued: number }> {
  const { body, headers } = signed[i % signed.length]!;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        headers: {
          ...headers,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => {
          let enqueued = 0;
          try {
            enqueued = (JSON.parse(text) as { enqueued?: number }).enqueued ?? 0;
          } catch {}
          resolve({ status: res.statusCode ?? 0, enqueued });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

let n = 0;
for (let w = 0; w < config.warmupRequests; w += config.concurrency) {
  await Promise.all(Array.from({ length: config.concurrency }, () => post(n++)));
}

const latencies: number[] = [];
let accepted = 0;
let failed = 0;
let enqueued = 0;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const deadline = t0 + config.durationMs;
const worker = async () => {
  while (performance.now() < deadline && latencies.length + failed < config.maxRequests) {
    const started = performance.now();
    try {
      const r = await post(n++);
      latencies.push(performance.now() - started);
      if (r.status === 202) {
        accepted++;
        enqueued += r.enqueued;
      } else failed++;
    } catch {
      failed++;
    }
  }
};
await Promise.all(Array.from({ length: config.concurrency }, worker));
const wallMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
const result: LoadResult = {
  requests: latencies.length + failed,
  accepted,
  failed,
  wallMs,
  p50Ms: pct(0.5),
  p99Ms: pct(0.99),
  enqueued,
  clientCpuMs: (cpu.user + cpu.system) / 1000,
};
agent.destroy();
console.log(JSON.stringify(result));
