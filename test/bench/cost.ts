/**
 * `npm run bench -- cost`: the monthly bill per 10,000 objects on Workers and on Lambda (with
 * EventBridge Scheduler or SQS carrying delayed messages), beside an always-on pod, from the
 * prices in `prices-2025.json` and `cost-model.ts`.
 *
 * Measured here, at a small size: probe shards of 40 External Proxies (plain-http probe URLs
 * through 4 forward proxies in another process) run through `proxyHealthTask(...).handleShard` as
 * a consumer runs them, steady state, with Lambda's telemetry (JSON log lines and CloudWatch EMF
 * metric lines, counted in lines and bytes; the distinct metric name × dimension sets a Proxy
 * keeps alive) and the host's default 32 probes in flight (a shard spreads its probes over 1 s):
 * per shard, the CPU ms (this process; Workers bill CPU, the Node figure stands in for workerd's),
 * the wall ms (Lambda bills duration), log lines and bytes, metric data points.
 *
 * Taken from the benches' results, not measured here: passes per object-hour and the share of
 * extra probes (latency confirmations) from a fleet bench's JSON line when
 * `KUBEFN_BENCH_COST_FLEET=<file>` names a file holding it (`npm run bench -- fleet`'s last line),
 * else the figures in `cost-inputs.json` (each with its source: a bench and commit, or "assumed").
 *
 * Scaled to 10,000 objects in the fleet bench's mix (9,000 External Proxies probed every 30 s,
 * 1,000 SubPools), which the output says.
 */
import { readFileSync } from "node:fs";
import { createEmfMetrics } from "../../functions/aws/telemetry.ts";
import { createAnalyticsMetrics } from "../../functions/cloudflare/telemetry.ts";
import { createLineLog } from "../../shared/app/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyHealthTask } from "../../shared/controllers/proxy/health-task.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/index.ts";
import type { Context } from "../../shared/runtime/index.ts";
import { FakeKube } from "../support/fake-kube.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import {
  type Bill,
  type FleetCounts,
  lambdaBill,
  monthlyVolumes,
  type Prices,
  podBill,
  type UnitCost,
  workersBill,
} from "./cost-model.ts";
import { startFixtures } from "./sweep.ts";

const SHARD_SIZE = 40;
const OBJECTS = 10_000;
const PROXY_SHARE = 0.9;

interface Inputs {
  passesPerObjectHour: { value: number; source: string };
  confirmationShare: { value: number; source: string };
  pass: UnitCost & { source: string };
  sweepPer1000: UnitCost & { source: string };
  /** CloudWatch metrics not per Proxy (counters, histograms by outcome). */
  sharedCustomMetrics: { value: number; source: string };
  sqsIdlePollsPerMonth: { value: number; source: string };
}

export interface ShardMeasure {
  shards: number;
  proxies: number;
  unit: UnitCost;
  /** Distinct metric name × dimension values per Proxy. */
  metricsPerProxy: number;
  /** Lambda's EMF lines per shard, by metric name, and in all. */
  pointsByName: Record<string, number>;
  emfLines: number;
}

/** Probe shards through the health task with Lambda's telemetry, counted. */
export async function measureShards(shardCount = 10): Promise<ShardMeasure> {
  const fixtures = await startFixtures(4);
  try {
    const { target, proxies: ports } = fixtures.ports;
    const kube = new FakeKube();
    const n = shardCount * SHARD_SIZE;
    for (let i = 0; i < n; i++) kube.seed(proxyResource, externalProxy(i, ports[i % ports.length]!, target));
    const tally = {
      lines: 0,
      bytes: 0,
      points: 0,
      pointBytes: 0,
      dimensions: new Set<string>(),
      byName: new Map<string, number>(),
    };
    const write = (line: string) => {
      tally.lines++;
      tally.bytes += Buffer.byteLength(line) + 1;
    };
    // Lambda's metrics as it writes them: held per invocation, a few EMF documents at its end
    // (here: one shard an invocation); every distinct metric name and dimension values is a
    // CloudWatch custom metric.
    const emf = createEmfMetrics({
      write: (document: string) => {
        tally.points++;
        tally.pointBytes += Buffer.byteLength(document) + 1;
        const o = JSON.parse(document) as {
          _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
        } & Record<string, unknown>;
        for (const directive of o._aws.CloudWatchMetrics) {
          for (const dims of directive.Dimensions) {
            for (const { Name: name } of directive.Metrics) {
              tally.dimensions.add(`${name}${dims.map((d) => `|${o[d]}`).join("")}`);
              tally.byName.set(name, (tally.byName.get(name) ?? 0) + 1);
            }
          }
        }
      },
    });
    // The Worker's metrics as it writes them: held per series, one point each when an
    // invocation ends (here: one shard an invocation).
    let workerPoints = 0;
    const analytics = createAnalyticsMetrics({
      writeDataPoint: () => {
        workerPoints++;
      },
    } as unknown as Parameters<typeof createAnalyticsMetrics>[0]);
    const log = createLineLog("json", write);
    const ctx: Context = {
      kube,
      queue: { send: async () => {} },
      clock: { now: () => new Date() },
      log,
      metrics: {
        count: (n, l, v) => {
          emf.count(n, l, v);
          analytics.count(n, l, v);
        },
        observe: (n, v, l) => {
          emf.observe(n, v, l);
          analytics.observe(n, v, l);
        },
        gauge: (n, v, l) => {
          emf.gauge(n, v, l);
          analytics.gauge(n, v, l);
        },
      },
      random: Math.random,
    };
    const task = proxyHealthTask({
      prober: createNodeProber(),
      allowList: loopbackProbeAllowList,
      concurrency: 32,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: SHARD_SIZE },
    });
    // The Proxies as listed now (the measured round: after the first one stored their health).
    const shardsOf = async () => {
      const listed = (await kube.list(proxyResource, { namespace: "bench" })).items;
      const out: KubeObject[][] = [];
      for (let i = 0; i < listed.length; i += SHARD_SIZE) out.push(listed.slice(i, i + SHARD_SIZE));
      return out;
    };
    // As the consumer runs it: the shard, then its "job" line.
    const runShard = async (shard: KubeObject[]) => {
      const t0 = performance.now();
      const counts = await task.handleShard(ctx, shard);
      log.info("job", { shard: counts, ms: Math.round(performance.now() - t0) });
      analytics.flush();
      emf.flush();
      return performance.now() - t0;
    };
    for (const shard of await shardsOf()) await runShard(shard); // first verdicts: written, unmeasured
    const shards = await shardsOf();
    Object.assign(tally, { lines: 0, bytes: 0, points: 0, pointBytes: 0 });
    workerPoints = 0;
    tally.dimensions.clear();
    tally.byName.clear();
    const c0 = process.cpuUsage();
    let wallMs = 0;
    for (const shard of shards) wallMs += await runShard(shard);
    const cpu = process.cpuUsage(c0);
    const perProxyDims = [...tally.dimensions].filter((d) => d.includes("|bench|")).length;
    return {
      shards: shards.length,
      proxies: n,
      unit: {
        cpuMs: (cpu.user + cpu.system) / 1000 / shards.length,
        wallMs: wallMs / shards.length,
        logLines: tally.lines / shards.length,
        logBytes: tally.bytes / shards.length,
        metricPoints: workerPoints / shards.length,
        metricBytes: tally.pointBytes / shards.length,
      },
      metricsPerProxy: perProxyDims / n,
      pointsByName: Object.fromEntries([...tally.byName].map(([k, v]) => [k, v / shards.length])),
      emfLines: tally.points / shards.length,
    };
  } finally {
    await fixtures.stop();
  }
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

/** Passes per object-hour and extra probes from a fleet bench's JSON line, where given. */
function fromFleet(file: string | undefined, inputs: Inputs): Inputs {
  if (!file) return inputs;
  const line = readFileSync(file, "utf8")
    .split("\n")
    .find((l) => l.startsWith('{"bench":"fleet"'));
  if (!line) throw new Error(`${file} holds no fleet bench JSON line`);
  const f = JSON.parse(line) as {
    commit: string;
    primaries: { proxies: number };
    steady: { kubefn: { passMessagesPerObjectHour: number; probesPerMinute: number } };
  };
  const due = f.primaries.proxies * 2;
  const source = `fleet bench, commit ${f.commit}, ${f.primaries.proxies} Proxies`;
  return {
    ...inputs,
    passesPerObjectHour: { value: f.steady.kubefn.passMessagesPerObjectHour, source },
    confirmationShare: { value: Math.max(0, f.steady.kubefn.probesPerMinute / due - 1), source },
  };
}

export interface CostResult {
  rows: BenchRow[];
  json: Record<string, unknown>;
}

export async function benchCost(): Promise<CostResult> {
  const prices = JSON.parse(readFileSync(new URL("./prices-2025.json", import.meta.url), "utf8")) as Prices;
  const inputs = fromFleet(
    process.env.KUBEFN_BENCH_COST_FLEET,
    JSON.parse(readFileSync(new URL("./cost-inputs.json", import.meta.url), "utf8")) as Inputs,
  );
  const m = await measureShards();
  const proxies = OBJECTS * PROXY_SHARE;
  const counts: FleetCounts = {
    objects: OBJECTS,
    proxies,
    probeIntervalSeconds: 30,
    shardSize: SHARD_SIZE,
    confirmationShare: inputs.confirmationShare.value,
    passesPerObjectHour: inputs.passesPerObjectHour.value,
    sweepsPerHour: 60,
    messagesPerInvocation: 1,
    shard: m.unit,
    pass: inputs.pass,
    sweepPer1000: inputs.sweepPer1000,
    customMetrics: Math.round(proxies * m.metricsPerProxy + inputs.sharedCustomMetrics.value),
    sqsIdlePollsPerMonth: inputs.sqsIdlePollsPerMonth.value,
  };
  const bills = [
    workersBill(counts, prices),
    lambdaBill(counts, prices, "scheduler"),
    lambdaBill(counts, prices, "sqs"),
  ];
  const pod = podBill(prices);
  const volumes = monthlyVolumes(counts);
  for (const b of bills) {
    process.stderr.write(`cost: ${b.platform} $${round(b.total, 2)} a month per ${OBJECTS} objects\n`);
    for (const l of b.lines)
      process.stderr.write(`cost:   ${l.item}: ${fmt(l.quantity)} ${l.unit} → $${round(l.dollars, 2)}\n`);
  }
  const scaled = `scaled from ${m.shards} measured shards (${m.proxies} Proxies) to ${OBJECTS.toLocaleString("en")} objects (${proxies.toLocaleString("en")} Proxies every 30 s + ${(OBJECTS - proxies).toLocaleString("en")} SubPools); prices ${prices.date}`;
  const top = (b: Bill) =>
    [...b.lines]
      .sort((a, c) => c.dollars - a.dollars)
      .slice(0, 2)
      .map((l) => `${l.item.split(" (")[0]} $${round(l.dollars, 0)}`)
      .join(", ");
  const rows: BenchRow[] = [
    ...bills.map((b) => ({
      name: `cost ${b.platform}`,
      figure: round(b.total, 2),
      unit: "$/month per 10,000 objects",
      note: `${top(b)}; ${scaled}`,
    })),
    {
      name: "cost pod",
      figure: `${pod.low}–${pod.high}`,
      unit: "$/month",
      note: `an always-on controller pod (the Node host), whatever the fleet's size while it fits`,
    },
    {
      name: "cost inputs",
      figure: round(m.unit.cpuMs, 1),
      unit: "CPU ms per shard",
      note: `shard of ${SHARD_SIZE}: ${round(m.unit.wallMs, 0)} wall ms, ${round(m.unit.logLines, 1)} log lines (${round(m.unit.logBytes, 0)} bytes), ${round(m.unit.metricPoints, 1)} Analytics Engine points (Workers), ${round(m.emfLines, 0)} EMF lines of ${round(m.unit.metricBytes, 0)} bytes (Lambda); ${round(m.metricsPerProxy, 2)} CloudWatch metrics per Proxy; ${fmt(volumes.shards)} shards + ${fmt(volumes.passes)} passes a month; passes/object-hour ${inputs.passesPerObjectHour.value} (${inputs.passesPerObjectHour.source})`,
    },
  ];
  const json = {
    bench: "cost",
    prices: { date: prices.date },
    objects: OBJECTS,
    proxies,
    measured: {
      shards: m.shards,
      proxies: m.proxies,
      shardUnit: m.unit,
      metricsPerProxy: m.metricsPerProxy,
      pointsByName: m.pointsByName,
    },
    inputs,
    volumes,
    bills: Object.fromEntries(bills.map((b) => [b.platform, round(b.total, 2)])),
    pod,
  };
  return { rows, json };
}

function fmt(n: number): string {
  if (n >= 1e6) return `${round(n / 1e6, 2)} M`;
  if (n >= 1e3) return `${round(n / 1e3, 1)} k`;
  return String(round(n, 2));
}
