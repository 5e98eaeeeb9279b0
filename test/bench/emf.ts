/**
 * What the Lambda's telemetry costs (in memory, one core, no AWS): the EMF bytes and CPU time of
 * one reconcile invocation (1 pass, and a batch of 10), of one probe shard (40 Proxies, the
 * default PROBE_SHARD_SIZE), and the CloudWatch custom metrics a fleet of 10,000 Proxies makes;
 * each for the EMF writer before this change (one document per data point, every label a
 * dimension; reproduced below) and now (aggregated per invocation, bounded dimensions). The data
 * points are the ones runPass, runJob and the health task make. CPU figures are medians of 9 runs.
 */
import { createEmfMetrics } from "../../functions/aws/telemetry.ts";
import type { Metrics } from "../../shared/runtime/index.ts";
import type { BenchRow } from "./cluster.ts";

/** The writer before: one EMF line per data point, all labels as dimensions (functions/aws/telemetry.ts until now). */
function emfBefore(write: (line: string) => void): Metrics & { flush(): number } {
  const emit = (name: string, value: number, unit: string, labels: Record<string, string> = {}) =>
    write(
      JSON.stringify({
        _aws: {
          Timestamp: Date.now(),
          CloudWatchMetrics: [
            { Namespace: "kubefn", Dimensions: [Object.keys(labels)], Metrics: [{ Name: name, Unit: unit }] },
          ],
        },
        ...labels,
        [name]: value,
      }),
    );
  return {
    count: (name, labels, value = 1) => emit(name, value, "Count", labels),
    observe: (name, value, labels) => emit(name, value, "None", labels),
    gauge: (name, value, labels) => emit(name, value, "None", labels),
    flush: () => 0,
  };
}

/** The data points of one pass (executor.ts), for Proxy `i`. */
function onePass(m: Metrics, i: number): void {
  const controller = "proxy";
  const seconds = (i % 100) / 1000;
  m.count("kubefn_passes_total", { controller, result: "done" });
  m.count("kubefn_pass_triggers_total", { controller, trigger: "drift", reason: "generation" });
  m.observe("kubefn_pass_duration_seconds", seconds, { controller });
  m.count("controller_runtime_reconcile_total", { controller, result: "success" });
  m.observe("controller_runtime_reconcile_time_seconds", seconds, { controller });
}

/** The data points of one probe shard of `size` Proxies from `first` (health-task.ts, job.ts). */
function oneShard(m: Metrics, first: number, size: number): void {
  for (let i = first; i < first + size; i++) {
    const proxy = { namespace: `ns-${i % 50}`, name: `p-${i}` };
    m.observe("kubefn_probe_duration_seconds", (i % 200) / 1000, { ok: "true" });
    m.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_796_040_000 + i, proxy);
    m.gauge("kubefn_proxy_probe_success", 1, proxy);
  }
  m.count("kubefn_probes_total", {}, size);
  m.count("kubefn_jobs_total", { controller: "proxy", task: "probe", result: "done" });
}

type Writer = (write: (line: string) => void) => Metrics & { flush(): number };
const writers: Record<"before" | "after", Writer> = {
  before: emfBefore,
  after: (write) => createEmfMetrics({ write }),
};

/** Bytes and lines one invocation writes. */
function invocation(writer: Writer, body: (m: Metrics) => void): { bytes: number; lines: string[] } {
  const lines: string[] = [];
  const m = writer((line) => lines.push(line));
  body(m);
  m.flush();
  return { bytes: lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0), lines };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** Median CPU µs of one invocation (record, serialise, flush to a sink that drops the lines). */
function cpuMicros(writer: Writer, body: (m: Metrics) => void, reps = 500): number {
  const run = () => {
    for (let r = 0; r < reps; r++) {
      const m = writer(() => {});
      body(m);
      m.flush();
    }
  };
  run();
  const us: number[] = [];
  for (let k = 0; k < 9; k++) {
    const t = process.cpuUsage();
    run();
    const used = process.cpuUsage(t);
    us.push((used.user + used.system) / reps);
  }
  return median(us);
}

/** Distinct CloudWatch metrics (namespace, name, dimension values) the lines define. */
function customMetrics(lines: string[]): number {
  const seen = new Set<string>();
  for (const line of lines) {
    const doc = JSON.parse(line) as Record<string, unknown> & {
      _aws: {
        CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[];
      };
    };
    for (const d of doc._aws.CloudWatchMetrics)
      for (const dims of d.Dimensions)
        for (const m of d.Metrics)
          seen.add(JSON.stringify([d.Namespace, m.Name, dims.map((k) => [k, doc[k]])]));
  }
  return seen.size;
}

export async function benchEmf(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const scenarios = [
    { name: "1 pass", per: 1, unit: "pass", body: (m: Metrics) => onePass(m, 7) },
    {
      name: "10 passes",
      per: 10,
      unit: "pass",
      body: (m: Metrics) => {
        for (let i = 0; i < 10; i++) onePass(m, i);
      },
    },
    { name: "probe shard of 40", per: 1, unit: "shard", body: (m: Metrics) => oneShard(m, 0, 40) },
  ];
  for (const s of scenarios) {
    const before = invocation(writers.before, s.body);
    const after = invocation(writers.after, s.body);
    rows.push({
      name: `EMF bytes, invocation of ${s.name}`,
      figure: `${Math.round(before.bytes / s.per)} → ${Math.round(after.bytes / s.per)}`,
      unit: `bytes/${s.unit}`,
      note: `${before.lines.length} → ${after.lines.length} log lines per invocation (before → after)`,
    });
    const cpuBefore = cpuMicros(writers.before, s.body);
    const cpuAfter = cpuMicros(writers.after, s.body);
    rows.push({
      name: `EMF CPU, invocation of ${s.name}`,
      figure: `${(cpuBefore / s.per).toFixed(1)} → ${(cpuAfter / s.per).toFixed(1)}`,
      unit: `µs/${s.unit} (1 core)`,
      note: "record, serialise, write to a sink that drops the lines",
    });
  }
  // A fleet of 10,000 Proxies probed once, in shards of 40, plus one pass each.
  const fleet = (m: Metrics) => {
    for (let first = 0; first < 10_000; first += 40) oneShard(m, first, 40);
    for (let i = 0; i < 10_000; i++) onePass(m, i);
  };
  const before = invocation(writers.before, fleet);
  const after = invocation(writers.after, fleet);
  rows.push({
    name: "CloudWatch custom metrics, 10,000 Proxies",
    figure: `${customMetrics(before.lines)} → ${customMetrics(after.lines)}`,
    unit: "metrics",
    note: "distinct namespace/name/dimension values after one probe and one pass each (billed per metric per month)",
  });
  return rows;
}
