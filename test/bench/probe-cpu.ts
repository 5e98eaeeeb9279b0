/**
 * `npm run bench -- probe-cpu`: the CPU one health probe costs the process that makes it, on the
 * Node host's code path. Forward proxies and the target run in their own process
 * (`fixtures-server.ts`), so this process's `process.cpuUsage()` is the prober's and the health
 * engine's alone; the probes are counted where they arrive, at the target.
 *
 * Two figures, each over `KUBEFN_BENCH_PROBE_CPU=<n>` probes (default 900) of plain-http probe
 * URLs through 4 forward proxies (absolute-form GET, one connection per probe), paced at
 * `KUBEFN_BENCH_PROBE_RATE=<probes/s>` (default 30: the fleet bench's 900 Proxies probed every
 * 30 s). Paced, not flat out: a process woken for each probe pays per probe what a busy loop
 * shares between many (timers, the event loop's turns, cold caches), and the host is paced.
 * - prober: `createNodeProber()` behind `boundedProber` (32 slots, the host's default), nothing else;
 * - shard: External Proxies in probe shards of 40 handed to `proxyHealthTask(...).handleShard`
 *   as the host's queue consumer runs them (settings as the host's defaults: 32 probes in flight,
 *   its 1 s spread over a shard, the host's Prometheus metrics; a shard started every 40/rate s),
 *   in steady state (the Proxies' health stored by a first, unmeasured round: a round writes
 *   nothing).
 *
 * `node --cpu-prof --import tsx test/bench/probe-cpu.ts` profiles it (a `.cpuprofile` in the
 * working directory, for Chrome DevTools or speedscope).
 */
import { PrometheusMetrics } from "../../shared/app/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyHealthTask } from "../../shared/controllers/proxy/health-task.ts";
import { boundedProber } from "../../shared/health/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/index.ts";
import type { Context } from "../../shared/runtime/index.ts";
import { FakeKube } from "../support/fake-kube.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import { startFixtures } from "./sweep.ts";

export interface ProbeCpuResult {
  probes: number;
  /** Probes started per second. */
  rate: number;
  /** CPU ms per probe counted at the target: the prober alone, and a shard's whole path. */
  proberCpuMs: number;
  shardCpuMs: number;
  /** Of those, kernel (system) time: the connect, writes and close of each probe's socket. */
  proberSystemMs: number;
  shardSystemMs: number;
}

const SHARD_SIZE = 40;
const CONCURRENCY = 32;

export async function benchProbeCpu(
  n = Number(process.env.KUBEFN_BENCH_PROBE_CPU ?? 900),
  rate = Number(process.env.KUBEFN_BENCH_PROBE_RATE ?? 30),
): Promise<ProbeCpuResult> {
  const fixtures = await startFixtures(4);
  try {
    const { target, proxies: ports } = fixtures.ports;
    const proxyAt = (i: number) => ({
      host: "127.0.0.1",
      port: ports[i % ports.length]!,
      scheme: "http" as const,
    });

    // The prober alone.
    const prober = boundedProber(createNodeProber(), CONCURRENCY);
    const url = `http://127.0.0.1:${target}/`;
    const probeN = async (count: number) => {
      const started: Promise<void>[] = [];
      for (let i = 0; i < count; i++) {
        started.push(
          prober
            .probe({
              proxy: proxyAt(i),
              url,
              expectedStatus: 200,
              timeoutMs: 5000,
              policy: { allow: loopbackProbeAllowList },
            })
            .then((r) => {
              if (!r.ok) throw new Error(`probe failed: ${JSON.stringify(r)}`);
            }),
        );
        await sleep(1000 / rate);
      }
      await Promise.all(started);
    };
    await probeN(Math.min(300, n)); // warm-up: JIT, module init
    const prober0 = await measure(fixtures.hits, () => probeN(n));

    // A shard's whole path, in steady state.
    const kube = new FakeKube();
    for (let i = 0; i < n; i++) kube.seed(proxyResource, externalProxy(i, proxyAt(i).port, target));
    const metrics = new PrometheusMetrics();
    const ctx: Context = {
      kube,
      queue: { send: async () => {} },
      clock: { now: () => new Date() },
      log: jsonLog(),
      metrics,
      random: Math.random,
    };
    const task = proxyHealthTask({
      prober: createNodeProber(),
      allowList: loopbackProbeAllowList,
      concurrency: CONCURRENCY,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: SHARD_SIZE },
    });
    const runShards = async () => {
      const listed = (await kube.list(proxyResource, { namespace: "bench" })).items;
      const shards: KubeObject[][] = [];
      for (let i = 0; i < listed.length; i += SHARD_SIZE) shards.push(listed.slice(i, i + SHARD_SIZE));
      const started: Promise<unknown>[] = [];
      for (const shard of shards) {
        started.push(task.handleShard(ctx, shard));
        await sleep((SHARD_SIZE / rate) * 1000);
      }
      await Promise.all(started);
    };
    await runShards(); // first verdicts written: the measured round writes nothing
    const shard0 = await measure(fixtures.hits, runShards);
    return {
      probes: n,
      rate,
      proberCpuMs: round(prober0.cpuMs / prober0.hits, 3),
      shardCpuMs: round(shard0.cpuMs / shard0.hits, 3),
      proberSystemMs: round(prober0.systemMs / prober0.hits, 3),
      shardSystemMs: round(shard0.systemMs / shard0.hits, 3),
    };
  } finally {
    await fixtures.stop();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** This process's CPU (user + system) and the target's hits over `fn`. */
async function measure(
  hits: () => Promise<number>,
  fn: () => Promise<void>,
): Promise<{ cpuMs: number; systemMs: number; hits: number; wallMs: number }> {
  const h0 = await hits();
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  await fn();
  const c = process.cpuUsage(c0);
  const wallMs = performance.now() - t0;
  const h = (await hits()) - h0;
  if (h === 0) throw new Error("no probe reached the target");
  return { cpuMs: (c.user + c.system) / 1000, systemMs: c.system / 1000, hits: h, wallMs };
}

function externalProxy(i: number, port: number, target: number): KubeObject {
  return {
    apiVersion: `${proxyResource.group}/${proxyResource.version}`,
    kind: "Proxy",
    metadata: { namespace: "bench", name: `ext-${i}`, uid: `uid-${i}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${target}/`, successThreshold: 1 },
    },
  };
}

/** A log that formats lines as the host's does and writes them nowhere. */
function jsonLog(): Context["log"] {
  const line = (level: string, msg: string, fields?: Record<string, unknown>) =>
    void JSON.stringify({ level, msg, ...fields });
  return {
    info: (m, f) => line("info", m, f),
    warn: (m, f) => line("warn", m, f),
    error: (m, f) => line("error", m, f),
  };
}

export async function benchProbeCpuRows(): Promise<BenchRow[]> {
  const r = await benchProbeCpu();
  return [
    {
      name: "probe-cpu prober",
      figure: r.proberCpuMs,
      unit: "CPU ms/probe",
      note: `${r.proberSystemMs} ms of it in the kernel; createNodeProber, ${r.probes} plain-http probes via 4 forward proxies in another process, ${r.rate} started a second (≤ ${CONCURRENCY} in flight)`,
    },
    {
      name: "probe-cpu shard",
      figure: r.shardCpuMs,
      unit: "CPU ms/probe",
      note: `${r.shardSystemMs} ms of it in the kernel; the same through proxyHealthTask.handleShard (shards of ${SHARD_SIZE}, each spread over 1 s; steady state, no writes; Prometheus metrics), ${r.rate} probes a second`,
    },
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await benchProbeCpu()));
}
