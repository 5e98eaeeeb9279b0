/**
 * The Lambda's metrics as CloudWatch Embedded Metric Format: aggregated per invocation, bounded
 * dimensions only, written to standard output and flushed at the end of every invocation.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createKubefn } from "../../shared/app/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { probeShardTask } from "../../shared/controllers/proxy/health-task.ts";
import { createRegistry, messageAuthenticatorFrom } from "../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { proxyController } from "../../test/unit/runtime/controllers.ts";
import { parseAwsEnv } from "./config.ts";

const SEAL_KEY = "telemetry-seal-key-0123456789abcdef";

import { createHandler } from "./handler.ts";
import {
  createEmfMetrics,
  EMF_DIMENSIONS,
  EMF_MAX_METRICS,
  EMF_MAX_VALUES,
  EMF_METRICS,
  EMF_NAMESPACE,
} from "./telemetry.ts";

interface EmfDocument {
  _aws: {
    Timestamp: number;
    CloudWatchMetrics: {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string; Unit: string }[];
    }[];
  };
  [member: string]: unknown;
}

/** EMF metrics whose lines are kept; every family a CloudWatch metric unless `defines` says. */
function captured(defines: (name: string) => boolean = () => true) {
  const documents: EmfDocument[] = [];
  const lines: string[] = [];
  const metrics = createEmfMetrics({
    write: (line) => {
      lines.push(line);
      documents.push(JSON.parse(line));
    },
    now: () => 1_796_040_000_000,
    defines,
  });
  return { metrics, documents, lines };
}

/** Each metric the documents define, with its dimension values and its value: what CloudWatch extracts. */
const flattened = (documents: EmfDocument[]) =>
  documents.flatMap((d) =>
    d._aws.CloudWatchMetrics.flatMap((directive) =>
      directive.Dimensions.flatMap((dims) =>
        directive.Metrics.map((m) => ({
          name: m.Name,
          unit: m.Unit,
          dimensions: Object.fromEntries(dims.map((k) => [k, d[k]])),
          value: d[m.Name],
        })),
      ),
    ),
  );

/** The data points one pass makes in the executor (runPass), as on every platform. */
function onePass(m: ReturnType<typeof createEmfMetrics>, i: number) {
  const controller = ["proxy", "subpool", "site"][i % 3] as string;
  m.count("kubefn_passes_total", { controller, result: "done" });
  m.count("kubefn_pass_triggers_total", { controller, trigger: "audit", reason: "" });
  m.observe("kubefn_pass_duration_seconds", (i % 100) / 1000, { controller });
  m.count("controller_runtime_reconcile_total", { controller, result: "success" });
  m.observe("controller_runtime_reconcile_time_seconds", (i % 100) / 1000, { controller });
}

afterEach(() => vi.restoreAllMocks());

describe("createEmfMetrics", () => {
  it("aggregates an invocation: 30 passes of 3 controllers are a few documents, values summed or listed", () => {
    const { metrics, documents } = captured();
    for (let i = 0; i < 30; i++) onePass(metrics, i);
    expect(documents).toEqual([]);
    metrics.flush();
    // Per controller two documents: kubefn's result=done and controller-runtime's result=success
    // cannot share one root; the trigger and histogram directives join the first.
    expect(documents).toHaveLength(6);
    const points = flattened(documents);
    expect(points).toHaveLength(15);
    expect(points).toContainEqual({
      name: "kubefn_passes_total",
      unit: "Count",
      dimensions: { controller: "proxy", result: "done" },
      value: 10,
    });
    const times = points.find((p) => p.name === "controller_runtime_reconcile_time_seconds");
    expect(times).toMatchObject({ unit: "Seconds", dimensions: { controller: "proxy" } });
    expect(times?.value).toHaveLength(10);
    // An empty label value is written `none`: CloudWatch refuses an empty dimension value.
    expect(points.find((p) => p.name === "kubefn_pass_triggers_total")?.dimensions).toEqual({
      controller: "proxy",
      trigger: "audit",
      reason: "none",
    });
    for (const d of documents) {
      expect(d._aws).toMatchObject({ Timestamp: 1_796_040_000_000 });
      for (const directive of d._aws.CloudWatchMetrics) expect(directive.Namespace).toBe(EMF_NAMESPACE);
    }
    // Flushed means forgotten: the next invocation starts empty.
    metrics.flush();
    expect(documents).toHaveLength(6);
  });

  it("a Proxy's name and namespace never reach a dimension: a counter is summed over them, a per-Proxy gauge is not written", () => {
    const { metrics, documents, lines } = captured();
    for (let i = 0; i < 50; i++) {
      const proxy = { namespace: `tenant-${i}`, name: `proxy-secret-name-${i}` };
      metrics.count("kubefn_pass_errors_total", { controller: "proxy", class: "transient", ...proxy });
      metrics.gauge("kubefn_proxy_probe_success", 1, proxy);
      metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_796_040_000, proxy);
      metrics.observe("kubefn_probe_duration_seconds", 0.01, { ok: "true", ...proxy });
    }
    metrics.count("kubefn_site_invalid_total", { site: "site-of-a-tenant" });
    metrics.flush();
    const all = lines.join("\n");
    expect(all).not.toMatch(/proxy-secret-name|tenant-|site-of-a-tenant/);
    expect(all).not.toContain("kubefn_proxy_probe_success");
    const points = flattened(documents);
    expect(points.map((p) => [p.name, p.dimensions])).toEqual([
      ["kubefn_pass_errors_total", { class: "transient", controller: "proxy" }],
      ["kubefn_probe_duration_seconds", { ok: "true" }],
      ["kubefn_site_invalid_total", {}],
    ]);
    expect(points[0]?.value).toBe(50);
    expect(points[1]?.value).toHaveLength(50);
    for (const p of points)
      for (const key of Object.keys(p.dimensions)) expect(EMF_DIMENSIONS.has(key)).toBe(true);
  });

  it("splits at the format's limits: 100 metrics per document, 100 values per array", () => {
    const { metrics, documents } = captured();
    for (let i = 0; i < 150; i++) metrics.count(`kubefn_test_${i}_total`, { controller: "proxy" });
    for (let i = 0; i < 250; i++) metrics.observe("kubefn_pass_duration_seconds", i, { controller: "site" });
    metrics.flush();
    const metricsOf = (d: EmfDocument) => d._aws.CloudWatchMetrics.reduce((n, m) => n + m.Metrics.length, 0);
    expect(documents.map(metricsOf)).toEqual([EMF_MAX_METRICS, 50, 1, 1, 1]);
    const values = documents
      .filter((d) => d.controller === "site")
      .map((d) => d.kubefn_pass_duration_seconds);
    expect(values.map((v) => (v as number[]).length)).toEqual([EMF_MAX_VALUES, EMF_MAX_VALUES, 50]);
    expect(values.flat()).toEqual(Array.from({ length: 250 }, (_, i) => i));
  });

  it("by default only EMF_METRICS are CloudWatch metrics: a probe invocation's other families are properties of its one line", () => {
    const documents: EmfDocument[] = [];
    const lines: string[] = [];
    const metrics = createEmfMetrics({
      write: (line) => {
        lines.push(line);
        documents.push(JSON.parse(line));
      },
    });
    // A second's probing at 10,000 objects: 300 probes, a few failing; the sweep's gauges by phase.
    for (let i = 0; i < 300; i++)
      metrics.observe("kubefn_probe_duration_seconds", (10 + (i % 50)) / 1000, { ok: String(i % 100 !== 0) });
    metrics.count("kubefn_probes_total", {}, 300);
    metrics.count("kubefn_jobs_total", { controller: "proxy", task: "probe", result: "done" });
    for (const phase of ["Ready", "Pending", "Unhealthy"]) metrics.gauge("kubefn_proxies", 3000, { phase });
    metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_796_040_000);
    metrics.count("controller_runtime_reconcile_errors_total", { controller: "proxy" });
    metrics.flush();
    expect(lines).toHaveLength(1);
    expect(
      flattened(documents)
        .map((p) => p.name)
        .sort(),
    ).toEqual(["controller_runtime_reconcile_errors_total", "kubefn_probes_total"]);
    const [document] = documents;
    expect(document).toMatchObject({
      kubefn_probe_duration_seconds: {
        "ok=true": { count: 297, min: 0.01, max: 0.059 },
        "ok=false": { count: 3, min: 0.01, max: 0.01 },
      },
      kubefn_proxies: { "phase=Ready": 3000, "phase=Pending": 3000, "phase=Unhealthy": 3000 },
      kubefn_proxy_last_probe_timestamp_seconds: 1_796_040_000,
    });
    // The 300 latencies are four numbers, not 300: the line stays short.
    expect(Buffer.byteLength(lines[0]!)).toBeLessThan(1_000);
  });

  it("writes to standard output, never through console.log (which Lambda's JSON log format wraps)", () => {
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const log = vi.spyOn(console, "log");
    const metrics = createEmfMetrics();
    metrics.count("kubefn_passes_total", { controller: "proxy", result: "done" });
    const bytes = metrics.flush();
    const emf = write.mock.calls.map(([chunk]) => String(chunk)).filter((c) => c.includes('"_aws"'));
    expect(emf).toHaveLength(1);
    expect(emf[0]?.endsWith("}\n")).toBe(true);
    expect(Buffer.byteLength(emf[0] ?? "")).toBe(bytes);
    expect(log).not.toHaveBeenCalled();
  });
});

describe("the Lambda handler flushes its metrics at the end of every invocation", () => {
  const env = {
    AWS_REGION: "us-east-1",
    // Never called here: the queue is a fake, or nothing is enqueued.
    QUEUE_URL: "http://127.0.0.1:9/123456789012/kubefn-reconcile",
    KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
    AUDIT_TOKEN: "test-audit-token-0123456789",
  };
  const context = { invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn" } as never;
  const silent = { info() {}, warn() {}, error() {} };
  const unauthenticated = {
    version: "2.0",
    rawPath: "/v1/events",
    rawQueryString: "",
    headers: { "content-type": "application/json" },
    requestContext: { http: { method: "POST", path: "/v1/events", sourceIp: "198.51.100.20" } },
    body: "{}",
    isBase64Encoded: false,
  };

  it("after an answered request: the default EMF metrics reach standard output", async () => {
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const handler = createHandler({
      env,
      kube: () => new FakeKube(),
      operators: () => ({ registry: createRegistry([proxyController()]), sweepTasks: [] }),
      log: silent,
    });
    const answer = (await handler(unauthenticated, context)) as { statusCode: number };
    expect(answer.statusCode).toBe(401);
    const emf = write.mock.calls.map(([c]) => JSON.parse(String(c)) as EmfDocument);
    // Not a CloudWatch metric (not in EMF_METRICS): a property of the invocation's one line.
    expect(emf).toMatchObject([{ kubefn_intake_rejected_total: { "reason=Unauthenticated": 1 } }]);
    expect(emf[0]?._aws.CloudWatchMetrics).toEqual([]);
  });

  it("after a failed invocation too", async () => {
    const flush = vi.fn();
    const handler = createHandler({
      env,
      kube: () => new FakeKube(),
      operators: () => ({ registry: createRegistry([proxyController()]), sweepTasks: [] }),
      log: silent,
      metrics: { count() {}, observe() {}, gauge() {}, flush },
    });
    await expect(handler({ unknown: "event" }, context)).rejects.toThrow(/unrecognised Lambda event/);
    expect(flush).toHaveBeenCalledTimes(1);
    await expect(
      createHandler({ env: {}, metrics: { count() {}, observe() {}, gauge() {}, flush } })(
        { source: "aws.events", "detail-type": "Scheduled Event" },
        context,
      ),
    ).rejects.toThrow(/invalid Lambda environment/);
    expect(flush).toHaveBeenCalledTimes(2);
  });
});

describe("a real probe shard's data points (the Proxy health task, through the seam)", () => {
  it("the health task labels its per-Proxy gauges with the Proxy's name; none of it reaches the EMF output", async () => {
    const kube = new FakeKube();
    const names = Array.from({ length: 5 }, (_, i) => `tenant-proxy-${i}`);
    const proxies = names.map((name) => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: "tenant-ns", name, uid: `uid-${name}`, generation: 1 },
      spec: {
        mode: "External",
        endpoint: { host: "203.0.113.7", port: 3128 },
        healthCheck: { probeURL: `http://203.0.113.8/${name}`, intervalSeconds: 60 },
      },
    }));
    for (const p of proxies) kube.seed(proxyResource, p);
    const { metrics, lines } = captured((name) => EMF_METRICS.has(name));
    const labelled: Record<string, string>[] = [];
    const spying = {
      ...metrics,
      gauge: (name: string, value: number, labels?: Record<string, string>) => {
        if (labels) labelled.push(labels);
        metrics.gauge(name, value, labels);
      },
    };
    const { ctx } = fakeContext(kube);
    const kubefn = createKubefn(
      parseAwsEnv({
        AWS_REGION: "us-east-1",
        // Never called here: the queue is a fake, or nothing is enqueued.
        QUEUE_URL: "http://127.0.0.1:9/123456789012/kubefn-reconcile",
        KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
        STATUS_SEAL_KEY: SEAL_KEY,
      }),
      {
        kube,
        queue: ctx.queue,
        prober: { probe: async () => ({ ok: true, latencyMs: 12 }) } as never,
        log: ctx.log,
        metrics: spying,
        clock: ctx.clock,
      },
    );
    // As the sweep sends it: under kubefn's MAC (an unsigned shard would be refused).
    const shard = await messageAuthenticatorFrom({ statusSealKey: SEAL_KEY })!.sign({
      kind: "job",
      job: { controller: "proxy", task: probeShardTask, slot: "0", objects: proxies },
    });
    expect(await kubefn.consume([{ body: shard }])).toEqual([{ ack: true }]);
    metrics.flush();
    // The task did pass the names (the Node host's /metrics keeps them per Proxy) …
    expect(labelled.map((l) => l.name)).toEqual(expect.arrayContaining(names));
    // … and EMF wrote the shard's counts and latencies without them.
    // One line for the invocation: its one CloudWatch metric, the rest as properties.
    expect(lines).toHaveLength(1);
    const document = JSON.parse(lines[0]!) as EmfDocument;
    expect(flattened([document]).map((p) => [p.name, p.value])).toEqual([["kubefn_probes_total", 5]]);
    expect(document).toMatchObject({
      kubefn_probe_duration_seconds: { "ok=true": { count: 5, sum: 0.06, min: 0.012, max: 0.012 } },
      kubefn_jobs_total: { "controller=proxy,result=done,task=probe": 1 },
    });
    expect(lines.join("\n")).not.toMatch(/tenant-proxy|tenant-ns/);
  });
});
