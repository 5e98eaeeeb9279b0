/**
 * What telemetry costs (in memory, one core, no cluster): the metric calls one reconcile pass makes
 * on the Node host (the executor's kubefn_pass* and controller_runtime_reconcile_* families, the
 * queue's workqueue_* families: 8 calls), those of one probe (a histogram observation and the
 * Proxy's two gauges, as before), a /metrics render at 10,000 Proxies, and the sweep's end-of-sweep
 * drop of unlisted Proxies' series at 10,000; and on Workers (Analytics Engine, aggregated per
 * invocation) a pass's calls, a probe shard's, and the flush that ends a queue batch of 10 probe
 * shards, with the points and bytes it writes. Figures are medians of 9 runs, in CPU time.
 */
import type { AnalyticsEngineDataPoint } from "@cloudflare/workers-types/index.ts";
import { createAnalyticsMetrics } from "../../functions/cloudflare/index.ts";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import { forgetProxySeries, listedProxySeries } from "../../shared/controllers/proxy/probe-series.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import type { Metrics } from "../../shared/runtime/index.ts";
import type { BenchRow } from "./cluster.ts";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Median CPU time of `fn`, ms: on a shared machine, wall time would count the other processes' turns. */
function timed(runs: number, fn: () => void): number {
  const ms: number[] = [];
  fn(); // warm up
  for (let r = 0; r < runs; r++) {
    const t = process.cpuUsage();
    fn();
    const used = process.cpuUsage(t);
    ms.push((used.user + used.system) / 1000);
  }
  return median(ms);
}

/** The calls of one pass, as runPass and the WorkQueue make them. */
function onePass(m: PrometheusMetrics, i: number): void {
  const controller = i % 3 === 0 ? "proxy" : i % 3 === 1 ? "subpool" : "site";
  const seconds = (i % 100) / 1000;
  m.count("workqueue_adds_total", { name: controller });
  m.observe("workqueue_queue_duration_seconds", seconds / 10, { name: controller });
  m.count("kubefn_passes_total", { controller, result: "done" });
  m.count("kubefn_pass_triggers_total", { controller, trigger: "audit", reason: "" });
  m.observe("kubefn_pass_duration_seconds", seconds, { controller });
  m.count("controller_runtime_reconcile_total", { controller, result: "success" });
  m.observe("controller_runtime_reconcile_time_seconds", seconds, { controller });
  m.observe("workqueue_work_duration_seconds", seconds, { name: controller });
}

/** The three calls a pass made before controller-runtime's and the workqueue families. */
function onePassBefore(m: PrometheusMetrics, i: number): void {
  const controller = i % 3 === 0 ? "proxy" : i % 3 === 1 ? "subpool" : "site";
  m.count("kubefn_passes_total", { controller, result: "done" });
  m.count("kubefn_pass_triggers_total", { controller, trigger: "audit", reason: "" });
  m.observe("kubefn_pass_duration_seconds", (i % 100) / 1000, { controller });
}

function oneProbe(m: Metrics, i: number, proxies: number): void {
  const proxy = { namespace: `ns-${i % 50}`, name: `p-${i % proxies}` };
  m.observe("kubefn_probe_duration_seconds", (i % 200) / 1000, { ok: "true" });
  m.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_800_000_000 + i, proxy);
  m.gauge("kubefn_proxy_probe_success", 1, proxy);
}

const proxyObjects = (n: number): KubeObject[] =>
  Array.from({ length: n }, (_, i) => ({
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: `ns-${i % 50}`, name: `p-${i}` },
  }));

export async function benchMetrics(): Promise<BenchRow[]> {
  const passes = 100_000;
  const m = new PrometheusMetrics();
  const passMs = timed(9, () => {
    for (let i = 0; i < passes; i++) onePass(m, i);
  });
  const before = new PrometheusMetrics();
  const beforeMs = timed(9, () => {
    for (let i = 0; i < passes; i++) onePassBefore(before, i);
  });
  const fleet = 10_000;
  const p = new PrometheusMetrics();
  const probeMs = timed(9, () => {
    for (let i = 0; i < passes; i++) oneProbe(p, i, fleet);
  });
  const renderMs = timed(9, () => void p.render());
  const bytes = p.render().length;
  const listed = proxyObjects(fleet);
  // Half the fleet is gone from the list: the sweep drops their series.
  const sweepMs = timed(9, () => {
    const q = new PrometheusMetrics();
    for (let i = 0; i < fleet; i++) oneProbe(q, i, fleet);
    const series = listedProxySeries(q);
    series.page(listed.slice(0, fleet / 2));
    series.finish();
  });
  const baseline = timed(9, () => {
    const q = new PrometheusMetrics();
    for (let i = 0; i < fleet; i++) oneProbe(q, i, fleet);
  });
  const q = new PrometheusMetrics();
  for (let i = 0; i < fleet; i++) oneProbe(q, i, fleet);
  const forgetMs = timed(1, () => {
    for (const o of listed)
      forgetProxySeries(q, { namespace: o.metadata.namespace!, name: o.metadata.name! });
  });
  const workers = benchWorkers();
  return [
    ...workers,
    {
      name: "metrics per pass",
      figure: Math.round((passMs * 1e6) / passes),
      unit: "ns/pass (1 core)",
      note: "8 calls: kubefn_pass*, controller_runtime_reconcile_*, workqueue_* (3 histograms, 5 counters); Node host PrometheusMetrics",
    },
    {
      name: "metrics per pass, kubefn_pass* only",
      figure: Math.round((beforeMs * 1e6) / passes),
      unit: "ns/pass (1 core)",
      note: "the 3 calls a pass made before this change, for comparison",
    },
    {
      name: "metrics per probe",
      figure: Math.round((probeMs * 1e6) / passes),
      unit: "ns/probe (1 core)",
      note: "3 calls, unchanged in number: kubefn_probe_duration_seconds and the Proxy's two gauges, 10,000 Proxies",
    },
    {
      name: "/metrics render, 10,000 Proxies",
      figure: Math.round(renderMs * 10) / 10,
      unit: "ms",
      note: `${Math.round(bytes / 1024)} KiB (the two per-Proxy gauges are most of it)`,
    },
    {
      name: "sweep drop of unlisted series, 10,000 Proxies",
      figure: Math.round(Math.max(0, sweepMs - baseline) * 10) / 10,
      unit: "ms/sweep",
      note: "5,000 listed (a Set of their keys), 5,000 dropped; once per sweep, not per probe; absent where metrics keep no series",
    },
    {
      name: "absent-pass drop, 10,000 Proxies",
      figure: Math.round((forgetMs * 1e6) / fleet),
      unit: "ns/Proxy",
      note: "two exact-key deletes per deleted Proxy",
    },
  ];
}

/** The calls of one pass on Workers: the executor's, without the Node host's workqueue_*. */
function onePassOnWorkers(m: Metrics, i: number): void {
  const controller = i % 3 === 0 ? "proxy" : i % 3 === 1 ? "subpool" : "site";
  const seconds = (i % 100) / 1000;
  m.count("kubefn_passes_total", { controller, result: "done" });
  m.count("kubefn_pass_triggers_total", { controller, trigger: "audit", reason: "" });
  m.observe("kubefn_pass_duration_seconds", seconds, { controller });
  m.count("controller_runtime_reconcile_total", { controller, result: "success" });
  m.observe("controller_runtime_reconcile_time_seconds", seconds, { controller });
}

/** The calls of one probe shard of 40 Proxies, as the probe handler and runJob make them. */
function oneShard(m: Metrics, s: number): void {
  for (let i = 0; i < 40; i++) oneProbe(m, s * 40 + i, 10_000);
  m.count("kubefn_probes_total", {}, 40);
  m.count("kubefn_jobs_total", { controller: "proxy", task: "probe", result: "done" });
}

/** Workers: calls into the aggregating registry, and the flush of a queue batch of 10 shards. */
function benchWorkers(): BenchRow[] {
  let written: AnalyticsEngineDataPoint[] = [];
  const dataset = { writeDataPoint: (p?: AnalyticsEngineDataPoint) => void written.push(p ?? {}) };
  const m = createAnalyticsMetrics(dataset);
  const passes = 100_000;
  const passMs = timed(9, () => {
    for (let i = 0; i < passes; i++) onePassOnWorkers(m, i);
    m.flush();
  });
  const shards = 10_000;
  const shardMs = timed(9, () => {
    for (let s = 0; s < shards; s++) oneShard(m, s);
    m.flush();
  });
  const flushRuns = 1_000;
  const flushMs = timed(9, () => {
    for (let r = 0; r < flushRuns; r++) {
      written = [];
      m.flush();
      for (let s = 0; s < 10; s++) oneShard(m, s);
      for (let i = 0; i < 10; i++) onePassOnWorkers(m, i);
    }
  });
  written = [];
  for (let s = 0; s < 10; s++) oneShard(m, s);
  for (let i = 0; i < 10; i++) onePassOnWorkers(m, i);
  m.flush();
  const bytes = JSON.stringify(written).length;
  return [
    {
      name: "Workers metrics per pass",
      figure: Math.round((passMs * 1e6) / passes),
      unit: "ns/pass (1 core)",
      note: "5 calls into the aggregating registry (Analytics Engine); no data point until the flush",
    },
    {
      name: "Workers metrics per probe shard",
      figure: Math.round((shardMs * 1e3) / shards),
      unit: "µs/shard (1 core)",
      note: "40 probes × 3 calls (the per-Proxy gauges dropped at the first lookup) + 2 counters",
    },
    {
      name: "Workers batch: 10 shards + 10 passes, recorded and flushed",
      figure: Math.round((flushMs * 1e3) / flushRuns),
      unit: "µs/invocation (1 core)",
      note: `${written.length} data points, ${bytes} bytes as JSON (limit 250 points per invocation)`,
    },
  ];
}
