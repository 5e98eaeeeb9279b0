import type { AnalyticsEngineDataPoint, AnalyticsEngineDataset } from "@cloudflare/workers-types/index.ts";
import { describe, expect, it } from "vitest";
import { families, objectLabels } from "../../shared/app/index.ts";
import { createAnalyticsMetrics, DROPPED_SERIES, MAX_POINTS_PER_INVOCATION } from "./telemetry.ts";

/** A dataset that keeps what it is given (the local binding discards it). */
function countingDataset(): AnalyticsEngineDataset & { points: AnalyticsEngineDataPoint[] } {
  const points: AnalyticsEngineDataPoint[] = [];
  return { points, writeDataPoint: (p) => void points.push(p ?? {}) };
}

const byName = (points: AnalyticsEngineDataPoint[], name: string) =>
  points.filter((p) => p.blobs?.[0] === name);

describe("createAnalyticsMetrics", () => {
  it("sums a counter per name and labels, whatever the labels' order, into one point per series", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    metrics.count("controller_runtime_reconcile_total", { controller: "proxy", result: "success" });
    metrics.count("controller_runtime_reconcile_total", { result: "success", controller: "proxy" }, 2);
    metrics.count("controller_runtime_reconcile_total", { controller: "proxy", result: "error" });
    metrics.count("kubefn_intake_errors_total");
    expect(metrics.flush()).toEqual({ points: 3, droppedSeries: 0 });
    expect(dataset.points).toEqual([
      {
        indexes: ["controller_runtime_reconcile_total"],
        blobs: ["controller_runtime_reconcile_total", "controller=proxy,result=success", "counter"],
        doubles: [3, 2, 1, 2],
      },
      {
        indexes: ["controller_runtime_reconcile_total"],
        blobs: ["controller_runtime_reconcile_total", "controller=proxy,result=error", "counter"],
        doubles: [1, 1, 1, 1],
      },
      {
        indexes: ["kubefn_intake_errors_total"],
        blobs: ["kubefn_intake_errors_total", "", "counter"],
        doubles: [1, 1, 1, 1],
      },
    ]);
  });

  it("keeps a histogram as sum, count, least and greatest, and a gauge as its last value", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    for (const v of [0.2, 0.05, 1.5])
      metrics.observe("kubefn_pass_duration_seconds", v, { controller: "site" });
    metrics.gauge("kubefn_leases_held", 7);
    metrics.gauge("kubefn_leases_held", 4);
    metrics.flush();
    const [histogram] = byName(dataset.points, "kubefn_pass_duration_seconds");
    expect(histogram?.blobs).toEqual(["kubefn_pass_duration_seconds", "controller=site", "histogram"]);
    expect(histogram?.doubles?.[0]).toBeCloseTo(1.75);
    expect(histogram?.doubles?.slice(1)).toEqual([3, 0.05, 1.5]);
    expect(byName(dataset.points, "kubefn_leases_held")).toEqual([
      { indexes: ["kubefn_leases_held"], blobs: ["kubefn_leases_held", "", "gauge"], doubles: [4, 2, 4, 7] },
    ]);
  });

  it("never names an object: object labels are stripped, and per-object gauges are not written", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    metrics.count("kubefn_site_invalid_total", { site: "a" });
    metrics.count("kubefn_site_invalid_total", { site: "b" });
    for (const name of ["p1", "p2"]) {
      metrics.gauge("kubefn_proxy_probe_success", 1, { namespace: "ns", name });
      metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1e9, { namespace: "ns", name });
    }
    metrics.flush();
    expect(dataset.points).toEqual([
      {
        indexes: ["kubefn_site_invalid_total"],
        blobs: ["kubefn_site_invalid_total", "", "counter"],
        doubles: [2, 2, 1, 1],
      },
    ]);
    expect(JSON.stringify(dataset.points)).not.toMatch(/p1|p2|site=/);
  });

  it("writes a batch of 10 probe shards of 40 Proxies (about 1,200 calls) as a handful of points", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    let calls = 0;
    for (let shard = 0; shard < 10; shard++) {
      for (let i = 0; i < 40; i++) {
        const proxy = { namespace: "ns", name: `p-${shard}-${i}` };
        metrics.observe("kubefn_probe_duration_seconds", 0.01 * i, { ok: String(i % 5 !== 0) });
        metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1e9, proxy);
        metrics.gauge("kubefn_proxy_probe_success", i % 5 !== 0 ? 1 : 0, proxy);
        calls += 3;
      }
      metrics.count("kubefn_probes_total", {}, 40);
      metrics.count("kubefn_jobs_total", { controller: "proxy", task: "probe", result: "done" });
      calls += 2;
    }
    expect(calls).toBeGreaterThan(MAX_POINTS_PER_INVOCATION);
    const flushed = metrics.flush();
    expect(flushed).toEqual({ points: dataset.points.length, droppedSeries: 0 });
    expect(flushed.points).toBe(4);
    const sum = (name: string, i: number) =>
      byName(dataset.points, name).reduce((n, p) => n + (p.doubles?.[i] ?? 0), 0);
    expect(sum("kubefn_probes_total", 0)).toBe(400);
    expect(sum("kubefn_probe_duration_seconds", 1)).toBe(400);
    expect(sum("kubefn_jobs_total", 0)).toBe(10);
  });

  it("writes at most the cap: the least-updated series go, counted in one point", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    // 300 series: the first 100 updated twice, the other 200 once.
    for (let i = 0; i < 300; i++) {
      const labels = { controller: `c${i}` };
      metrics.count("kubefn_passes_total", labels);
      if (i < 100) metrics.count("kubefn_passes_total", labels);
    }
    expect(metrics.flush()).toEqual({ points: MAX_POINTS_PER_INVOCATION, droppedSeries: 51 });
    expect(dataset.points).toHaveLength(MAX_POINTS_PER_INVOCATION);
    const kept = byName(dataset.points, "kubefn_passes_total");
    expect(kept).toHaveLength(249);
    expect(kept.filter((p) => p.doubles?.[1] === 2)).toHaveLength(100);
    expect(byName(dataset.points, DROPPED_SERIES)).toEqual([
      { indexes: [DROPPED_SERIES], blobs: [DROPPED_SERIES, "", "counter"], doubles: [51, 51, 0, 0] },
    ]);
    // Every update is accounted for: kept ones in their series, the rest in the dropped point.
    const updates = dataset.points.reduce((n, p) => n + (p.doubles?.[1] ?? 0), 0);
    expect(updates).toBe(400);
  });

  it("forgets what it wrote: the next flush writes only what came after", () => {
    const dataset = countingDataset();
    const metrics = createAnalyticsMetrics(dataset);
    metrics.count("kubefn_probes_total", {}, 5);
    metrics.flush();
    expect(metrics.flush()).toEqual({ points: 0, droppedSeries: 0 });
    metrics.count("kubefn_probes_total", {}, 2);
    metrics.flush();
    expect(dataset.points.map((p) => p.doubles?.[0])).toEqual([5, 2]);
  });

  it("never throws: a dataset that refuses a point ends the flush", () => {
    let accepted = 0;
    const refusing: AnalyticsEngineDataset = {
      writeDataPoint: () => {
        if (accepted === 2) throw new Error("too many data points");
        accepted++;
      },
    };
    const metrics = createAnalyticsMetrics(refusing);
    for (const controller of ["a", "b", "c", "d"]) metrics.count("kubefn_passes_total", { controller });
    expect(metrics.flush()).toEqual({ points: 2, droppedSeries: 0 });
  });

  it("holds nothing without a dataset", () => {
    const metrics = createAnalyticsMetrics(undefined);
    metrics.count("kubefn_probes_total", {}, 5);
    expect(metrics.flush()).toEqual({ points: 0, droppedSeries: 0 });
  });

  it("strips object labels only of families that exist", () => {
    expect(Object.keys(objectLabels).filter((name) => !(name in families))).toEqual([]);
  });
});
