/**
 * infra/monitoring/alerts.yaml: every expression parses under Prometheus' own PromQL grammar
 * (@prometheus-io/lezer-promql, the parser of Prometheus' UI), and every metric it selects is one
 * the code emits through the Metrics port — which the Node host's /metrics renders.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parser } from "@prometheus-io/lezer-promql";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = fileURLToPath(new URL("../../", import.meta.url));

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const rules = (
  parse(readFileSync(join(root, "infra/monitoring/alerts.yaml"), "utf8")) as {
    groups: { name: string; rules: Rule[] }[];
  }
).groups.flatMap((g) => g.rules);

/** Syntax errors and the metric names selected, from the PromQL syntax tree. */
function analyse(expr: string): { errors: number; metrics: string[] } {
  const tree = parser.parse(expr);
  let errors = 0;
  const metrics: string[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors++;
      if (node.name === "VectorSelector") {
        const id = node.node.getChild("Identifier");
        if (id) metrics.push(expr.slice(id.from, id.to));
      }
    },
  });
  return { errors, metrics };
}

/** Metric names the code emits: `metrics.count|gauge|observe("kubefn_...")` in shared/ and functions/. */
function emittedMetrics(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts") && !path.endsWith(".test.ts")) {
        for (const m of readFileSync(path, "utf8").matchAll(
          /\.(?:count|gauge|observe)\(\s*"(kubefn_[a-z_]+)"/g,
        )) {
          names.add(m[1]!);
        }
      }
    }
  };
  walk(join(root, "shared"));
  walk(join(root, "functions"));
  return names;
}

const emitted = emittedMetrics();

describe("infra/monitoring/alerts.yaml", () => {
  it("covers failing passes, stalled sweeps and unhealthy fleets", () => {
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining(["KubefnPassesFailing", "KubefnSweepStalled", "KubefnProxyFleetUnhealthy"]),
    );
  });

  it.each(rules.map((r) => [r.alert, r] as const))(
    "%s parses and selects only emitted metrics",
    (_name, rule) => {
      const { errors, metrics } = analyse(rule.expr);
      expect(errors).toBe(0);
      expect(metrics.length).toBeGreaterThan(0);
      expect(metrics.filter((m) => !emitted.has(m))).toEqual([]);
      expect(rule.labels?.severity).toMatch(/^(warning|critical)$/);
      expect(rule.annotations?.summary).toBeTruthy();
      if (rule.for !== undefined) expect(rule.for).toMatch(/^\d+[smh]$/);
    },
  );

  it("the checks can fail: a syntax error and an unknown metric are caught", () => {
    expect(analyse("sum(rate(kubefn_passes_total[5m]) > ").errors).toBeGreaterThan(0);
    expect(analyse("rate(kubefn_passes_totl[5m]) > 0").metrics.filter((m) => !emitted.has(m))).toEqual([
      "kubefn_passes_totl",
    ]);
  });
});
