/**
 * infra/monitoring/alerts.yaml: `promtool check rules` accepts it and `promtool test rules` passes
 * its unit tests (infra/monitoring/alerts.test.yaml: synthetic kubefn_* series, each alert firing on
 * a bad fleet and quiet on a healthy one); promtool is Debian's, unpacked into .promtool/bin by
 * scripts/promtool.sh, which `npm test` runs. Every metric the rules select and the tests feed is
 * one the code emits through the Metrics port, which the Node host's /metrics renders (the e2e test
 * of examples checks the rules' metrics against a live host's /metrics).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { parse } from "yaml";
import { analyse, emittedMetrics } from "../support/promql.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const promtool = join(root, ".promtool/bin/promtool");
const rulesFile = join(root, "infra/monitoring/alerts.yaml");
const testsFile = join(root, "infra/monitoring/alerts.test.yaml");

const rules = (
  parse(readFileSync(rulesFile, "utf8")) as {
    groups: { name: string; rules: Rule[] }[];
  }
).groups.flatMap((g) => g.rules);

interface AlertTests {
  tests: {
    input_series: { series: string }[];
    alert_rule_test: { alertname: string; exp_alerts: unknown[] }[];
  }[];
}
const alertTests = parse(readFileSync(testsFile, "utf8")) as AlertTests;

function run(args: string[], cwd: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(promtool, args, { cwd }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

/** A copy of the rules and their tests in a temporary directory (removed after the test), the rules edited by `edit`. */
function editedCopy(edit: (rules: string) => string): string {
  const dir = mkdtempSync(join(tmpdir(), "alert-rules-"));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const original = readFileSync(rulesFile, "utf8");
  const edited = edit(original);
  expect(edited).not.toBe(original);
  writeFileSync(join(dir, "alerts.yaml"), edited);
  writeFileSync(join(dir, "alerts.test.yaml"), readFileSync(testsFile, "utf8"));
  return dir;
}

/** What kubefn's code emits, and `up`, which Prometheus writes for every scrape target. */
const emitted = new Set([...emittedMetrics(), "up"]);

describe("infra/monitoring/alerts.yaml", () => {
  it("covers failing passes, stalled sweeps, unhealthy fleets, a host or relay down or unscraped, the admission gate and the relay's drops", () => {
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        "KubefnPassesFailing",
        "KubefnSweepStalled",
        "KubefnProxyFleetUnhealthy",
        "KubefnHostDown",
        "KubefnHostUnscraped",
        "KubefnAdmissionPoliciesNotReady",
        "KubefnRelayDown",
        "KubefnRelayUnscraped",
        "KubefnRelayDropping",
      ]),
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

describe("infra/monitoring/alerts.yaml under promtool", () => {
  const dir = join(root, "infra/monitoring");
  beforeAll(() => {
    if (!existsSync(promtool)) throw new Error(`${promtool} missing: run bash scripts/promtool.sh`);
  });

  it("promtool check rules accepts every rule", async () => {
    const { code, out } = await run(["check", "rules", "alerts.yaml"], dir);
    expect(out).toContain(`SUCCESS: ${rules.length} rules found`);
    expect(code).toBe(0);
  });

  it("promtool test rules passes the alerts' unit tests", async () => {
    const { code, out } = await run(["test", "rules", "alerts.test.yaml"], dir);
    expect(out).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  it("every alert is tested firing, and the tests feed only series the code emits", () => {
    const fired = new Set(
      alertTests.tests.flatMap((t) =>
        t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    expect(rules.map((r) => r.alert).filter((a) => !fired.has(a))).toEqual([]);
    const fed = alertTests.tests.flatMap((t) => t.input_series.map((s) => /^[a-z_:]+/.exec(s.series)?.[0]));
    expect(fed.filter((m) => !m || !emitted.has(m))).toEqual([]);
  });

  it("the checks can fail: a broken expression and a moved threshold are caught", async () => {
    const broken = editedCopy((r) => r.replace("> 300", "> "));
    const checked = await run(["check", "rules", "alerts.yaml"], broken);
    expect(checked.code).not.toBe(0);
    expect(checked.out).toMatch(/FAILED/);
    const moved = editedCopy((r) => r.replace("> 0.2\n", "> 0.5\n"));
    const tested = await run(["test", "rules", "alerts.test.yaml"], moved);
    expect(tested.code).not.toBe(0);
    expect(tested.out).toMatch(/FAILED[\s\S]*KubefnPassesFailing/);
  });
});
