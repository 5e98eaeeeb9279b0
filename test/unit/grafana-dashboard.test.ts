/**
 * infra/monitoring/grafana-dashboard.json: every panel query parses with Prometheus' own PromQL
 * grammar (after Grafana's variables take sample values, as Grafana substitutes them before sending
 * a query) and selects only series the code emits; the panels the dashboard promises are there.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { analyse, emittedMetrics } from "../support/promql.ts";

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}
const dashboard = JSON.parse(
  readFileSync(new URL("../../infra/monitoring/grafana-dashboard.json", import.meta.url), "utf8"),
) as { panels: Panel[]; templating: { list: { name: string }[] } };

const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== "row");
const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => [p.title, t.expr] as const));
const emitted = emittedMetrics();

/** Grafana's variables as it fills them in: `$__rate_interval` a duration, `$controller` a regex. */
const substituted = (expr: string) =>
  expr.replaceAll("$__rate_interval", "1m").replaceAll("$controller", "proxy|subpool");

describe("infra/monitoring/grafana-dashboard.json", () => {
  it("charts reconcile rate by result, errors, p99 reconcile time, queue depth and wait, probes and intake", () => {
    const selected = new Set(queries.flatMap(([, q]) => analyse(substituted(q)).metrics));
    for (const metric of [
      "controller_runtime_reconcile_total",
      "controller_runtime_reconcile_errors_total",
      "controller_runtime_reconcile_time_seconds_bucket",
      "workqueue_depth",
      "workqueue_queue_duration_seconds_bucket",
      "kubefn_probes_total",
      "kubefn_intake_requests_total",
      "kubefn_intake_rejected_total",
    ])
      expect(selected.has(metric), metric).toBe(true);
    expect(
      queries.some(([, q]) =>
        /histogram_quantile\(0\.99, .*controller_runtime_reconcile_time_seconds_bucket/.test(q),
      ),
    ).toBe(true);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(["datasource", "controller"]);
  });

  it.each(queries)("%s: %s parses and selects only emitted series", (_title, expr) => {
    const { errors, metrics } = analyse(substituted(expr));
    expect(errors).toBe(0);
    expect(metrics.length).toBeGreaterThan(0);
    expect(metrics.filter((m) => !emitted.has(m))).toEqual([]);
  });

  it("the checks can fail: an unsubstituted variable, a broken query and a misspelt series are caught", () => {
    expect(analyse("rate(workqueue_adds_total[$__rate_interval])").errors).toBeGreaterThan(0);
    expect(
      analyse("histogram_quantile(0.99, sum by (le) (rate(workqueue_queue_duration_seconds_bucket[1m]))")
        .errors,
    ).toBeGreaterThan(0);
    expect(analyse("sum(workqueue_depths)").metrics.filter((m) => !emitted.has(m))).toEqual([
      "workqueue_depths",
    ]);
  });
});
