import { expect, it } from "vitest";
import { PrometheusMetrics } from "./prometheus.ts";

it("renders counters, gauges and histograms in the Prometheus text format", () => {
  const m = new PrometheusMetrics();
  m.count("kubefn_passes_total", { controller: "proxy", result: "done" });
  m.count("kubefn_passes_total", { result: "done", controller: "proxy" }, 2);
  m.gauge("kubefn_proxies", 3, { phase: "Ready" });
  m.observe("kubefn_probe_seconds", 0.02);
  m.observe("kubefn_probe_seconds", 3);
  const text = m.render();
  expect(text).toContain('kubefn_passes_total{controller="proxy",result="done"} 3');
  expect(text).toContain('kubefn_proxies{phase="Ready"} 3');
  expect(text).toContain('kubefn_probe_seconds_bucket{le="0.025"} 1');
  expect(text).toContain('kubefn_probe_seconds_bucket{le="+Inf"} 2');
  expect(text).toContain("kubefn_probe_seconds_count 2");
  expect(m.value("kubefn_passes_total", { controller: "proxy", result: "done" })).toBe(3);
});
