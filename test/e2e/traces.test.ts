/**
 * The Node host's spans over OTLP (docs/monitoring.md, Traces), against the run's devcluster and a
 * small OTLP/HTTP receiver on loopback: two Proxies applied with kubectl, their audit event handed
 * to the host as its webhook would, and the chain that one change causes found as one trace — the
 * intake batch, the passes it enqueued, their follow-ups — with the span ids the host's log lines
 * print; and the sweep's chain: the sweep, its probe shard, the health pass the shard sent.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, findCondition, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import { auditEventsSince, clusterInfo, kubectl, waitForAuditEvent } from "../setup/cluster.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlp-receiver.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type ProxyObject = KubeObject & {
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }> };
};

const auditToken = randomBytes(16).toString("hex");
const version = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

let admin: Kube;
let receiver: OtlpReceiver;
let host: HostProcess;
let forward: ForwardProxy;
let target: Target;
let ns: string;

beforeAll(async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(clusterInfo().kubeconfig);
  admin = createKube(createNodeTransport(kc));
  ns = `traces-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  // The Managed Proxy's Pod and Secret: kubefn may touch them only where the namespace opted in.
  await optInNamespace(admin, ns);
  receiver = await startOtlpReceiver();
  target = await startHttpTarget();
  forward = await startForwardProxy({ host: "127.0.0.1" });
  host = await startHost({
    KUBECONFIG: await functionsKubeconfig(clusterInfo().kubeconfig),
    KUBEFN_AUDIT_TOKEN: auditToken,
    KUBEFN_SWEEP_SECONDS: "3",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  });
}, 120_000);

afterAll(async () => {
  // The namespace goes while the host runs, so that it takes the Proxies' finalizers off.
  try {
    if (ns && host?.child.exitCode === null) await removeNamespaces(admin, [ns]);
  } finally {
    expect(await host?.stop()).toBe(0);
    await forward?.close();
    await target?.close();
    await receiver?.close();
  }
}, 180_000);

/**
 * Hands the host the API server's audit events for `verb` on both Proxies (seen from `since`), as
 * its audit webhook would; resolves with the number of requests the batch enqueued.
 */
async function handOver(verb: "create" | "delete", since: number): Promise<number> {
  const events = await Promise.all(
    ["managed", "probed"].map((name) =>
      waitForAuditEvent(
        (e) =>
          e.stage === "ResponseComplete" &&
          e.verb === verb &&
          e.objectRef?.resource === "proxies" &&
          e.objectRef.namespace === ns &&
          e.objectRef.name === name,
        { since },
      ),
    ),
  );
  const posted = await fetch(`${host.url}/v1/events`, {
    method: "POST",
    headers: { authorization: `Bearer ${auditToken}`, "content-type": "application/json" },
    body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: events }),
  });
  expect(posted.status).toBe(202);
  return ((await posted.json()) as { enqueued: number }).enqueued;
}

const get = (name: string) => admin.get<ProxyObject>(proxyResource, { namespace: ns, name });
const condition = (p: ProxyObject, type: string) =>
  findCondition(p.status?.conditions as never, type)?.status;
const spansNamed = (name: string) => receiver.spans.filter((s) => s.attributes["kubefn.name"] === name);
const passesOf = (name: string, traceId: string) =>
  spansNamed(name).filter((s) => s.traceId === traceId && s.name === "pass proxy");

describe("spans over OTLP from the Node host", () => {
  it("a kubectl-applied Proxy's intake batch, its passes and their follow-ups form one trace, with the logs' ids", async () => {
    // A sweep has run: the Proxies below get their first pass from the intake, not the sweep.
    await host.waitFor((l) => l.msg === "sweep");
    const since = (await auditEventsSince()).next;
    const proxies = [
      {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: ns, name: "managed" },
        spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config\n" } },
      },
      {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: ns, name: "probed" },
        spec: {
          mode: "External",
          endpoint: { host: "127.0.0.1", port: forward.port, scheme: "http" },
          healthCheck: {
            probeURL: `http://127.0.0.1:${target.port}/`,
            intervalSeconds: 5,
            successThreshold: 1,
          },
        },
      },
    ];
    const applied = await kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: proxies }),
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(await handOver("create", since)).toBe(2);

    // The Managed Proxy's Pod comes up over a few follow-ups; the External one is probed healthy.
    await eventually(
      "the Managed Proxy Provisioned",
      async () => (condition(await get("managed"), "Provisioned") === "True" ? true : undefined),
      90_000,
    );
    await eventually(
      "the probed Proxy Healthy",
      async () => (condition(await get("probed"), "Healthy") === "True" ? true : undefined),
      90_000,
    );

    // The batch's line names its span; the exported batch span has that id.
    const line = await host.waitFor(
      (l) => l.msg === "intake batch" && l.source === "audit" && l.enqueued === 2,
    );
    const intake = await eventually("the intake batch's span", async () =>
      receiver.spans.find((s) => s.spanId === line.span),
    );
    expect(intake).toMatchObject({ traceId: line.trace, parentSpanId: "", name: "intake batch", kind: 4 });
    expect(intake.attributes).toMatchObject({ "kubefn.source": "audit", "messaging.batch.message_count": 2 });
    expect(intake.resource).toMatchObject({ "service.name": "kubefn", "service.version": version });

    // Each Proxy's first pass is a child of the batch; the Managed one's follow-ups chain on.
    const trace = intake.traceId;
    const followUp = await eventually(
      "a follow-up pass of the Managed Proxy in the batch's trace",
      async () => passesOf("managed", trace).find((s) => s.attributes["kubefn.trigger"] === "follow-up"),
    );
    for (const name of ["managed", "probed"]) {
      const first = passesOf(name, trace).find((s) => s.parentSpanId === intake.spanId);
      expect(first, `${name}'s first pass`).toBeDefined();
      expect(first!.attributes).toMatchObject({
        "k8s.namespace.name": ns,
        "kubefn.kind": "Proxy",
        "kubefn.name": name,
        "kubefn.controller": "proxy",
        "kubefn.trigger": "audit",
      });
      expect(first!.kind).toBe(5);
      // The pass's log line carries the exported span's ids.
      const passLine = host.lines.find((l) => l.msg === "pass" && l.span === first!.spanId);
      expect(passLine).toMatchObject({ key: `proxy/${ns}/${name}`, trace, trigger: "audit" });
    }
    // Up the parent chain from the follow-up: passes of the Managed Proxy, then the batch.
    const byId = new Map(receiver.spans.map((s) => [s.spanId, s]));
    const chain: ReceivedSpan[] = [followUp];
    while (chain.at(-1)!.parentSpanId) {
      const parent = byId.get(chain.at(-1)!.parentSpanId);
      expect(parent, `the parent of ${chain.at(-1)!.name} ${chain.at(-1)!.spanId}`).toBeDefined();
      chain.push(parent!);
    }
    expect(chain.at(-1)).toBe(intake);
    expect(chain.length).toBeGreaterThanOrEqual(3);
    expect(chain.every((s) => s.traceId === trace)).toBe(true);
    expect(chain.slice(0, -1).every((s) => s.attributes["kubefn.name"] === "managed")).toBe(true);
  });

  it("a probe shard is a child of its sweep, and the health pass it sent a child of the shard", async () => {
    // The probed Proxy turned Healthy through a probe shard's report: a `drift:health-report` pass.
    const health = await eventually("the probed Proxy's health pass", async () =>
      spansNamed("probed").find((s) => s.attributes["kubefn.trigger"] === "drift:health-report"),
    );
    const byId = new Map(receiver.spans.map((s) => [s.spanId, s]));
    const shard = byId.get(health.parentSpanId);
    expect(shard).toMatchObject({ name: "job proxy/probe", traceId: health.traceId, kind: 5 });
    expect(shard!.attributes).toMatchObject({ "kubefn.task": "probe", "kubefn.result": "done" });
    const sweep = byId.get(shard!.parentSpanId);
    expect(sweep).toMatchObject({ name: "sweep", traceId: health.traceId, parentSpanId: "" });
    const jobLine = host.lines.find((l) => l.msg === "job" && l.span === shard!.spanId);
    expect(jobLine).toMatchObject({ trace: health.traceId, task: "probe" });
  });

  it("on SIGTERM, the host sends the spans it holds before it exits: every hop its lines name is exported", async () => {
    // The deletions handed over, so that the host takes the finalizers off now, not at a sweep.
    const since = (await auditEventsSince()).next;
    const deleted = await kubectl(["delete", "proxies", "--all", "-n", ns, "--wait=false"]);
    expect(deleted.code, deleted.stderr).toBe(0);
    await handOver("delete", since);
    await removeNamespaces(admin, [ns]);
    // Spans go out 5 s after the first one waiting: a batch answered just before the signal
    // leaves only with the stop's flush.
    const last = await fetch(`${host.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${auditToken}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] }),
    });
    expect(last.status).toBe(202);
    const lastLine = await host.waitFor((l) => l.msg === "intake batch" && l.enqueued === 0);
    expect(await host.stop("SIGTERM")).toBe(0);
    expect(receiver.spans.find((s) => s.spanId === lastLine.span)).toMatchObject({ name: "intake batch" });
    const hops = host.lines.filter((l) => ["intake batch", "pass", "job", "sweep"].includes(l.msg));
    expect(hops.length).toBeGreaterThan(0);
    const exported = new Set(receiver.spans.map((s) => s.spanId));
    expect(hops.filter((l) => !exported.has(String(l.span)))).toEqual([]);
  }, 240_000);
});
