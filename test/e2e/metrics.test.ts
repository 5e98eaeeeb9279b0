/**
 * The Node host's `/metrics` as Prometheus reads it: a host (a separate process, as the
 * least-privileged ServiceAccount, against the run's devcluster) reconciles and probes an External
 * Proxy, and `promtool check metrics` (Prometheus' own linter: HELP and TYPE on every family,
 * counters ending in `_total`, …) accepts the page, which has controller-runtime's reconcile and
 * workqueue families, kubefn's own and the process'. Deleting the Proxy takes its probe series
 * off the page (here by the sweep that no longer lists it: no event reaches this host).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
