/**
 * The Node host's `/metrics` as Prometheus reads it: a host (a separate process, as the
 * least-privileged ServiceAccount, against the run's devcluster) reconciles and probes an External
 * Proxy, and `promtool check metrics` (Prometheus' own linter: HELP and TYPE on every family,
 * counters ending in `_total`, …) accepts the page, which has controller-runtime's reconcile and
 * workqueue families, kubefn's own and the process'. Deleting the Proxy takes its probe series
 * off the page (here by the sweep that no longer lists it: no event reaches this host). And
 * infra/monitoring/alerts.yaml under `promtool test rules` on series as this host and a relay
 * really expose them (names and labels scraped here, with the job and instance labels Prometheus
 * adds): the admission gate's, the host's scrape target, the relay's drops.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { parse, stringify } from "yaml";
import { defaultRelayKinds } from "../../infra/relay/main.ts";
import { createRelay } from "../../infra/relay/relay.ts";
import { clientNodeWatchStream } from "../../infra/relay/watch-stream.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube } from "../../shared/kube/port.ts";
import { clusterInfo, kubeConfig } from "../setup/cluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { tempDir } from "../support/temp-dir.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

const promtool = fileURLToPath(new URL("../../.promtool/bin/promtool", import.meta.url));
const ns = `metrics-${randomBytes(3).toString("hex")}`;

let admin: Kube;
let host: HostProcess;
let forward: ForwardProxy;
let target: Target;

/** `promtool check metrics` on `text` (its stdin): exit code and what it printed. */
function checkMetrics(text: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(promtool, ["check", "metrics"], (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
    child.stdin?.end(text);
  });
}

const scrape = async () => (await fetch(`${host.url}/metrics`)).text();
const series = (text: string, name: string) => text.split("\n").filter((l) => l.startsWith(name));

beforeAll(async () => {
  if (!existsSync(promtool)) throw new Error(`${promtool} missing: run bash scripts/promtool.sh`);
  admin = createKube(createNodeTransport(kubeConfig()));
  // Installs the CRDs and RBAC, and gives the host the ServiceAccount's kubeconfig.
  const kubeconfig = await functionsKubeconfig(clusterInfo().kubeconfig);
  target = await startHttpTarget();
  forward = await startForwardProxy();
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  // Created before the host starts: its first (full) sweep brings the Proxy's first pass.
  await admin.create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: ns, name: "edge" },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: forward.port, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${target.port}/`, intervalSeconds: 5 },
    },
  });
  host = await startHost({
    KUBECONFIG: kubeconfig,
    KUBEFN_SWEEP_SECONDS: "2",
    // The per-Proxy probe series are opt-in (bounded cardinality by default).
    KUBEFN_METRICS_PER_OBJECT: "true",
  });
}, 180_000);

afterAll(async () => {
  if (host) expect(await host.stop()).toBe(0);
  await admin?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
  await forward?.close();
  await target?.close();
});

describe("the Node host's /metrics", () => {
  it("after a reconcile and a probe, promtool check metrics accepts it, with controller-runtime's families and the process'", async () => {
    const probed = `kubefn_proxy_probe_success{name="edge",namespace="${ns}"}`;
    const text = await eventually(
      "the Proxy reconciled and probed",
      async () => {
        const t = await scrape();
        // A probe shard sets the Proxy's gauges, writes its health, then counts its probes.
        const reconciled = series(
          t,
          'controller_runtime_reconcile_total{controller="proxy",result="success"} ',
        )[0];
        return Number(reconciled?.split(" ")[1]) > 0 &&
          t.includes(probed) &&
          t.includes("kubefn_probes_total ")
          ? t
          : undefined;
      },
      90_000,
    );
    const checked = await checkMetrics(text);
    expect(checked.out).toBe("");
    expect(checked.code).toBe(0);

    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!] as const));
    expect(
      Object.fromEntries(
        [
          "controller_runtime_reconcile_total",
          "controller_runtime_reconcile_time_seconds",
          "workqueue_depth",
          "workqueue_adds_total",
          "workqueue_queue_duration_seconds",
          "kubefn_passes_total",
          "kubefn_probes_total",
          "kubefn_api_requests_retried_total",
          "process_cpu_seconds_total",
          "process_resident_memory_bytes",
          "process_start_time_seconds",
          "nodejs_heap_size_used_bytes",
        ].map((name) => [name, types.get(name)]),
      ),
    ).toEqual({
      controller_runtime_reconcile_total: "counter",
      controller_runtime_reconcile_time_seconds: "histogram",
      workqueue_depth: "gauge",
      workqueue_adds_total: "counter",
      workqueue_queue_duration_seconds: "histogram",
      kubefn_passes_total: "counter",
      kubefn_probes_total: "counter",
      kubefn_api_requests_retried_total: "counter",
      process_cpu_seconds_total: "counter",
      process_resident_memory_bytes: "gauge",
      process_start_time_seconds: "gauge",
      nodejs_heap_size_used_bytes: "gauge",
    });
    // Every family has its HELP line.
    const helped = new Set([...text.matchAll(/^# HELP (\S+) \S/gm)].map((m) => m[1]));
    expect([...types.keys()].filter((name) => !helped.has(name))).toEqual([]);
    expect(series(text, 'workqueue_queue_duration_seconds_bucket{name="proxy",le="+Inf"}')).toHaveLength(1);
    // Every controller's reconcile series exist from the start, at 0 until counted.
    for (const controller of ["proxy", "subpool", "site"])
      expect(series(text, `controller_runtime_reconcile_total{controller="${controller}",`)).toHaveLength(4);
    expect(Number(series(text, "process_resident_memory_bytes")[0]?.split(" ")[1])).toBeGreaterThan(1e6);
  });

  it("the checks can fail: promtool refuses the page as it was (no HELP, a counter without _total)", async () => {
    const before = "# TYPE kubefn_api_requests_retried counter\nkubefn_api_requests_retried 0\n";
    const checked = await checkMetrics(before);
    expect(checked.code).not.toBe(0);
    expect(checked.out).toMatch(/no help text/);
    expect(checked.out).toMatch(/_total/);
  });

  it("a deleted Proxy's probe series leave the page", async () => {
    const probeSeries = (t: string) =>
      t.split("\n").filter((l) => l.startsWith("kubefn_proxy_") && l.includes(`namespace="${ns}"`));
    expect(probeSeries(await scrape())).toHaveLength(2);
    await admin.delete(proxyResource, { namespace: ns, name: "edge" });
    await eventually(
      "the Proxy's series gone",
      async () => (probeSeries(await scrape()).length === 0 ? true : undefined),
      30_000,
    );
    expect(await checkMetrics(await scrape())).toEqual({ code: 0, out: "" });
  });
});

/** `name{labels}` of the first sample of `name` on a scraped page, labels parsed. */
function sampleOf(text: string, name: string): Record<string, string> | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  if (!line) return undefined;
  const body = /^[^{ ]+\{(.*)\} /.exec(line)?.[1] ?? "";
  return Object.fromEntries([...body.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
}

const seriesText = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",")}}`;

describe("kubefn's alerts on the series this host and a relay expose", () => {
  it("KubefnAdmissionPoliciesNotReady, KubefnHostDown, KubefnHostUnscraped and KubefnRelayDropping fire under promtool", async () => {
    const hostPage = await scrape();
    const ready = sampleOf(hostPage, "kubefn_admission_policies_ready");
    expect(ready, "the host exposes kubefn_admission_policies_ready").toBeDefined();
    expect(series(hostPage, "kubefn_admission_policies_ready")[0]).toMatch(/ 1$/);

    // A relay whose secret intake does not hold: every batch refused, its events dropped.
    const relay = createRelay({
      kinds: defaultRelayKinds(),
      kube: admin,
      stream: clientNodeWatchStream(kubeConfig(), { timeoutSeconds: 60 }),
      intakeUrl: `${host.url}/v1/events`,
      secret: randomBytes(24).toString("hex"),
      batch: { maxEvents: 50, maxDelayMs: 200 },
      bufferSize: 1000,
      backoff: { baseMs: 200, maxMs: 1000 },
      log: { info() {}, warn() {}, error() {} },
    });
    relay.start();
    onTestFinished(() => relay.stop());
    await eventually("relay synced", async () => (relay.synced() ? true : undefined));
    const dropped = `metrics-drop-${randomBytes(3).toString("hex")}`;
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: dropped },
    });
    onTestFinished(() => admin.delete(Resources.Namespace, { name: dropped }).then(() => undefined));
    const relayPage = await eventually("the relay counted a refused batch", async () => {
      const t = relay.metrics.render();
      return sampleOf(t, "kubefn_relay_dropped_total")?.reason === "rejected" ? t : undefined;
    });
    const drops = sampleOf(relayPage, "kubefn_relay_dropped_total") ?? {};

    // As Prometheus stores them: the target's job (the ServiceMonitor's Service) and instance.
    const instance = new URL(host.url).host;
    const hostTarget = { job: "kubefn", instance };
    const relayTarget = { job: "kubefn-relay", instance: "127.0.0.1:8081" };
    const dir = tempDir("kubefn-alerts-").path;
    copyFileSync(
      fileURLToPath(new URL("../../infra/monitoring/alerts.yaml", import.meta.url)),
      join(dir, "alerts.yaml"),
    );
    const rules = (
      parse(readFileSync(join(dir, "alerts.yaml"), "utf8")) as {
        groups: { rules: { alert: string; annotations: Record<string, string> }[] }[];
      }
    ).groups.flatMap((g) => g.rules);
    const annotations = (alert: string, labels: Record<string, string>) =>
      Object.fromEntries(
        Object.entries(rules.find((r) => r.alert === alert)?.annotations ?? {}).map(([k, v]) => [
          k,
          v.trim().replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, l: string) => labels[l] ?? ""),
        ]),
      );
    const expect_ = (alert: string, labels: Record<string, string>) => ({
      exp_labels: labels,
      exp_annotations: annotations(alert, labels),
    });
    const tests = {
      rule_files: ["alerts.yaml"],
      evaluation_interval: "1m",
      tests: [
        {
          // The host's gate finds the policies gone at minute 10, and the host stops answering at 20.
          interval: "1m",
          input_series: [
            {
              series: seriesText("kubefn_admission_policies_ready", { ...ready, ...hostTarget }),
              values: "1x10 0x30",
            },
            { series: seriesText("up", hostTarget), values: "1x20 0x20" },
            {
              series: seriesText("kubefn_relay_dropped_total", { ...drops, ...relayTarget }),
              values: "0x15 0+25x25",
            },
            { series: seriesText("up", relayTarget), values: "1x40" },
          ],
          alert_rule_test: [
            { eval_time: "12m", alertname: "KubefnAdmissionPoliciesNotReady", exp_alerts: [] },
            {
              eval_time: "18m",
              alertname: "KubefnAdmissionPoliciesNotReady",
              exp_alerts: [expect_("KubefnAdmissionPoliciesNotReady", { severity: "critical", instance })],
            },
            { eval_time: "18m", alertname: "KubefnHostDown", exp_alerts: [] },
            {
              eval_time: "30m",
              alertname: "KubefnHostDown",
              exp_alerts: [expect_("KubefnHostDown", { severity: "critical", ...hostTarget })],
            },
            { eval_time: "30m", alertname: "KubefnHostUnscraped", exp_alerts: [] },
            { eval_time: "14m", alertname: "KubefnRelayDropping", exp_alerts: [] },
            {
              eval_time: "20m",
              alertname: "KubefnRelayDropping",
              exp_alerts: [
                expect_("KubefnRelayDropping", { severity: "warning", reason: drops.reason ?? "" }),
              ],
            },
          ],
        },
        {
          // Nothing scrapes the host.
          interval: "1m",
          input_series: [{ series: seriesText("up", relayTarget), values: "1x30" }],
          alert_rule_test: [
            {
              eval_time: "20m",
              alertname: "KubefnHostUnscraped",
              exp_alerts: [expect_("KubefnHostUnscraped", { severity: "warning", job: "kubefn" })],
            },
          ],
        },
      ],
    };
    writeFileSync(join(dir, "live.test.yaml"), stringify(tests));
    const run = (file: string) =>
      new Promise<{ code: number; out: string }>((resolve) => {
        execFile(promtool, ["test", "rules", file], { cwd: dir }, (err, stdout, stderr) => {
          resolve({
            code: err ? (typeof err.code === "number" ? err.code : -1) : 0,
            out: `${stdout}${stderr}`,
          });
        });
      });
    const passed = await run("live.test.yaml");
    expect(passed.out).toContain("SUCCESS");
    expect(passed.code).toBe(0);
    // The check bites: a healthy host's gauge (1 throughout) does not fire it.
    const healthy = stringify(tests).replace("values: 1x10 0x30", "values: 1x40");
    expect(healthy).not.toBe(stringify(tests));
    writeFileSync(join(dir, "healthy.test.yaml"), healthy);
    const failed = await run("healthy.test.yaml");
    expect(failed.code).not.toBe(0);
    expect(failed.out).toMatch(/FAILED[\s\S]*KubefnAdmissionPoliciesNotReady/);
  });
});
