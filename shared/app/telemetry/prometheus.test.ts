import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { families, RECONCILE_TIME_BUCKETS } from "./families.ts";
import { PrometheusMetrics } from "./prometheus.ts";

const root = fileURLToPath(new URL("../../../", import.meta.url));

/** `name → method` for every `.count|gauge|observe|setTotal("name"` in shared/ and functions/ (tests excluded). */
function emitted(): Map<string, string> {
  const names = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts") && !path.endsWith(".test.ts"))
        for (const m of readFileSync(path, "utf8").matchAll(
          /\.(count|gauge|observe|setTotal)\(\s*"([a-z_:]+)"/g,
        ))
          names.set(m[2]!, m[1]!);
    }
  };
  walk(join(root, "shared"));
  walk(join(root, "functions"));
  return names;
}

describe("PrometheusMetrics", () => {
  it("renders counters, gauges and histograms in the Prometheus text format", () => {
    const m = new PrometheusMetrics();
    m.count("kubefn_passes_total", { controller: "proxy", result: "done" });
    m.count("kubefn_passes_total", { result: "done", controller: "proxy" }, 2);
    m.gauge("kubefn_proxies", 3, { phase: "Ready" });
    m.observe("kubefn_probe_duration_seconds", 0.02);
    m.observe("kubefn_probe_duration_seconds", 3);
    const text = m.render();
    expect(text).toContain('kubefn_passes_total{controller="proxy",result="done"} 3');
    expect(text).toContain('kubefn_proxies{phase="Ready"} 3');
    expect(text).toContain('kubefn_probe_duration_seconds_bucket{le="0.01"} 0');
    expect(text).toContain('kubefn_probe_duration_seconds_bucket{le="0.025"} 1');
    expect(text).toContain('kubefn_probe_duration_seconds_bucket{le="2.5"} 1');
    expect(text).toContain('kubefn_probe_duration_seconds_bucket{le="5"} 2');
    expect(text).toContain('kubefn_probe_duration_seconds_bucket{le="+Inf"} 2');
    expect(text).toContain("kubefn_probe_duration_seconds_sum 3.02");
    expect(text).toContain("kubefn_probe_duration_seconds_count 2");
    expect(m.value("kubefn_passes_total", { controller: "proxy", result: "done" })).toBe(3);
  });

  it("gives every family its HELP and TYPE line, once, before its samples", () => {
    const m = new PrometheusMetrics();
    m.count("kubefn_passes_total", { controller: "a", result: "done" });
    m.count("kubefn_passes_total", { controller: "b", result: "done" });
    m.observe("controller_runtime_reconcile_time_seconds", 0.2, { controller: "a" });
    const lines = m.render().trimEnd().split("\n");
    expect(lines.slice(0, 2)).toEqual([
      `# HELP kubefn_passes_total ${families.kubefn_passes_total!.help}`,
      "# TYPE kubefn_passes_total counter",
    ]);
    expect(lines.filter((l) => l.startsWith("# TYPE"))).toEqual([
      "# TYPE kubefn_passes_total counter",
      "# TYPE controller_runtime_reconcile_time_seconds histogram",
    ]);
  });

  it("a histogram has its family's buckets: controller-runtime's for the reconcile time", () => {
    const m = new PrometheusMetrics();
    m.observe("controller_runtime_reconcile_time_seconds", 0.33, { controller: "proxy" });
    const les = [...m.render().matchAll(/_bucket\{controller="proxy",le="([^"]+)"\} (\d+)/g)];
    expect(les.map((l) => l[1])).toEqual([...RECONCILE_TIME_BUCKETS.map(String), "+Inf"]);
    // 0.33 falls in (0.3, 0.35]: every bucket from 0.35 up counts it.
    expect(les.find((l) => l[1] === "0.3")?.[2]).toBe("0");
    expect(les.find((l) => l[1] === "0.35")?.[2]).toBe("1");
  });

  it("escapes label values, so a tenant's name cannot break the exposition", () => {
    const m = new PrometheusMetrics();
    m.gauge("kubefn_proxy_probe_success", 1, { namespace: "a", name: 'x"}\n\\y' });
    expect(m.render()).toContain('kubefn_proxy_probe_success{name="x\\"}\\n\\\\y",namespace="a"} 1');
  });

  it("forgets one series by its labels, or every series a predicate picks", () => {
    const m = new PrometheusMetrics();
    for (const name of ["p1", "p2", "p3"])
      m.gauge("kubefn_proxy_probe_success", 1, { namespace: "ns", name });
    m.forget("kubefn_proxy_probe_success", { name: "p1", namespace: "ns" });
    expect(m.render()).not.toContain('name="p1"');
    m.forget("kubefn_proxy_probe_success", (l) => l.name !== "p2");
    const text = m.render();
    expect(text).toContain('name="p2"');
    expect(text).not.toContain('name="p3"');
    m.forget("kubefn_proxy_probe_success", () => true);
    // No samples, no HELP/TYPE either.
    expect(m.render()).not.toContain("kubefn_proxy_probe_success");
  });

  it("setTotal puts a total kept elsewhere into a counter", () => {
    const m = new PrometheusMetrics();
    m.setTotal("kubefn_api_requests_retried_total", 4);
    m.setTotal("kubefn_api_requests_retried_total", 7);
    expect(m.render()).toContain(
      "# TYPE kubefn_api_requests_retried_total counter\nkubefn_api_requests_retried_total 7\n",
    );
  });
});

describe("the metric families", () => {
  const names = emitted();

  it("every name the code emits is in the table, with the type its method makes", () => {
    const typeOf = { count: "counter", setTotal: "counter", gauge: "gauge", observe: "histogram" } as const;
    const wrong = [...names].filter(
      ([name, method]) => families[name]?.type !== typeOf[method as keyof typeof typeOf],
    );
    expect(wrong).toEqual([]);
    expect(names.size).toBeGreaterThan(40);
  });

  it("every family in the table is emitted somewhere (no stale names)", () => {
    // The per-Proxy gauges are set through a name list (probe-series.ts) as well as literally.
    expect(Object.keys(families).filter((name) => !names.has(name))).toEqual([]);
  });

  it.each(Object.entries(families))("%s follows Prometheus' naming conventions", (name, family) => {
    expect(name).toMatch(/^[a-z][a-z0-9_]*$/);
    if (family.type === "counter") expect(name).toMatch(/_total$/);
    else expect(name).not.toMatch(/_total$/);
    if (family.type === "histogram") expect(name).toMatch(/_seconds$/);
    // Units are base units, spelled out.
    expect(name).not.toMatch(/_(ms|milliseconds|secs|kb|mb)(_|$)/);
    expect(family.help).toMatch(/^[A-Z].*\.$/);
  });
});
