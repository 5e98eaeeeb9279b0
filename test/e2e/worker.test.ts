/**
 * kubefn's Cloudflare Worker (wrangler.toml, bundled by wrangler) running in workerd through
 * wrangler's local test harness, against the real devcluster: Queues and cron are miniflare's
 * local simulation, the API server is real and reached through the devcluster's plain-HTTP
 * loopback proxy with the least-privileged `kubefn-system/kubefn` ServiceAccount token.
 *
 * - relay batch → intake → queue → pass: an External Proxy converges;
 * - a real audit EventList (the API server's own event for the create) does the same;
 * - one relay event for a Managed Proxy: the Worker alone drives it Pending → Provisioning → Ready
 *   (a Pod on the devcluster's simulated node) through delayed follow-ups on the queue
 *   (`delaySeconds`), and one event for its deletion runs the finalizer to the end;
 * - no event at all: the cron sweep alone converges a Proxy and probes its health through
 *   workerd's `connect()` sockets;
 * - a `provider: gce` Proxy: the GCE provider wired from the Worker's vars and the
 *   `GCE_CREDENTIALS` secret signs its JWT with workerd's Web Crypto against a local GCE-shaped
 *   server, and deletion holds the finalizer until the VM is gone;
 * - probes fan out: the sweep sends probe-shard messages (delayed to each Proxy's phase), the
 *   queue consumer probes them, never more than 6 at once, even when 12 fall due together;
 * - steady state costs nothing per object: once 5, then 20 External Proxies (beside a Managed
 *   Proxy and a SubPool) have converged, a cron run sends no message and makes the same number of
 *   API requests (lists per kind, counted on the wire by a pass-through in front of the API server).
 */

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Queue } from "@cloudflare/workers-types/index.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { signBatch } from "../../shared/app/intake/index.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyProbeView } from "../../shared/controllers/proxy/health-subject.ts";
import { ownerTagKey } from "../../shared/controllers/proxy/providers/provider.ts";
import { subPoolNamespaceName, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { fnv1a32, isNotFound, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { ENVELOPE_VERSION, type Message, messageAuthenticatorFrom } from "../../shared/runtime/index.ts";
import { eventually, waitForAuditEvent } from "../setup/cluster.ts";
import { type FaultProxy, type SeenRequest, startFaultProxy } from "../support/fault-proxy.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { workerCluster } from "../support/worker-cluster.ts";
import { type GceServer, startGceServer } from "./gce-server.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = `worker-e2e-${Math.random().toString(36).slice(2, 8)}`;
const auditToken = crypto.randomUUID();
const relaySecret = crypto.randomUUID();
const apiToken = crypto.randomUUID();
const statusSealKey = crypto.randomUUID();

type Proxy = ProxyObject & KubeObject;

let kube: Kube;
let harness: TestHarness;
let forwardProxy: ForwardProxy;
let target: Target;
let gce: GceServer;
/** The Worker's way to the API server: a pass-through that sees every request (no faults). */
let wire: FaultProxy;

beforeAll(async () => {
  const { httpProxy, workerToken, kube: admin } = await workerCluster(namespace);
  kube = admin;
  [forwardProxy, target, gce] = await Promise.all([
    startForwardProxy(),
    startHttpTarget(),
    startGceServer("kubefn-worker-e2e"),
  ]);
  wire = await startFaultProxy(httpProxy);

  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        // Drift lists and decisions at every cron tick (resync 60), so one tick finds a new Proxy.
        vars: {
          KUBE_SERVER: wire.url,
          PROXY_RESYNC_SECONDS: "60",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
          // Every Proxy here is in one namespace, and the fan-out test measures the instance's 6
          // connections: the per-namespace share (3 by default) would halve it.
          PROBE_NAMESPACE_CONCURRENCY: "6",
          GCE_PROJECT: "kubefn-worker-e2e",
          GCE_ZONES: "us-central1-a",
          GCE_NETWORK: "crawl-proxies",
          GCE_COMPUTE_URL: `${gce.url}/compute/v1`,
        },
        secrets: {
          KUBE_TOKEN: workerToken,
          AUDIT_TOKEN: auditToken,
          RELAY_SECRET: relaySecret,
          GCE_CREDENTIALS: gce.credentials,
          API_TOKEN: apiToken,
          // Keys the MAC on the probe shards' objects: without it probes run in the cron sweep.
          STATUS_SEAL_KEY: statusSealKey,
        },
      },
    ],
  });
  await harness.listen();
}, 180_000);

afterAll(async () => {
  // The namespace goes while the Worker runs (its cron sends the passes that take the finalizers
  // off what a failed test left), and is gone before the next file starts.
  try {
    if (kube && harness)
      await removeNamespaces(kube, [namespace], {
        tick: () => harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() }),
      });
  } finally {
    await harness?.close();
    await Promise.all([forwardProxy?.close(), target?.close(), gce?.close(), wire?.close()]);
  }
}, 180_000);

function externalProxy(name: string, spec: Partial<Proxy["spec"]> = {}): Proxy {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace },
    spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" }, ...spec },
  } as Proxy;
}

const getProxy = (name: string) => kube.get<Proxy>(proxyResource, { namespace, name });
const condition = (p: Proxy, type: string) => p.status?.conditions?.find((c) => c.type === type);

/** Waits until the Worker has marked the Proxy Provisioned=True/ExternalEndpoint with its ip. */
function provisioned(name: string, timeoutMs = 30_000): Promise<Proxy> {
  return eventually(
    async () => {
      const p = await getProxy(name);
      const c = condition(p, "Provisioned");
      return c?.status === "True" && c.reason === "ExternalEndpoint" && p.status?.ip ? p : undefined;
    },
    { timeoutMs, intervalMs: 200, what: `${name} Provisioned=True` },
  );
}

/** The status was written by the Worker's identity (field manager "kubefn"), not by the test. */
function writtenByWorker(p: Proxy): boolean {
  const entries = (p.metadata.managedFields ?? []) as Array<{ manager?: string; subresource?: string }>;
  return entries.some((f) => f.manager === "kubefn" && f.subresource === "status");
}

/** A signed relay batch announcing `object` (ADDED, or MODIFIED for a deletion in progress). */
async function relay(object: KubeObject, type: "ADDED" | "MODIFIED" = "ADDED") {
  const body = JSON.stringify({
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: [
      { type, resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" }, object },
    ],
  });
  return postEvents(body, await signBatch(relaySecret, body, Date.now() / 1000));
}

/** The Worker's own JSON log lines (telemetry.ts) captured by the harness. */
function workerLogs(): Array<Record<string, unknown>> {
  return harness.getLogs().flatMap((l) => {
    try {
      return [JSON.parse(l.message) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

const postEvents = (body: string, headers: Record<string, string>) =>
  harness.fetch("/v1/events", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });

/** One cron run: the API requests seen while it ran and its `sweep` log line. */
async function cronRun(): Promise<{ requests: SeenRequest[]; sweep: Record<string, unknown> }> {
  const logs = workerLogs().length;
  const from = wire.seen().length;
  const result = await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
  expect(result.outcome).toBe("ok");
  const requests = wire.seen().slice(from);
  const sweep = await eventually(
    async () =>
      workerLogs()
        .slice(logs)
        .find((l) => l.msg === "sweep"),
    {
      timeoutMs: 10_000,
      what: "the cron run's sweep line",
    },
  );
  return { requests, sweep };
}

/** The messages a sweep line reports: `<controller>:<reason>` per message, and probe shards. */
function sweptMessages(sweep: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [field, value] of Object.entries(sweep)) {
    if (typeof value === "string") {
      const due = /, (\d+) due(?: \((.*)\))?$/.exec(value);
      if (!due || due[1] === "0") continue;
      for (const reason of (due[2] ?? "").split(" ")) {
        const [label, n] = reason.split("=");
        for (let i = 0; i < Number(n); i++) out.push(`${field}:${label}`);
      }
    } else if (field === "proxy-health" && typeof value === "object" && value !== null) {
      const shards = (value as { shards?: number }).shards ?? 0;
      for (let i = 0; i < shards; i++) out.push("proxy-health:shard");
    }
  }
  return out;
}

/** Waits until `n` pass lines have been logged since log line `from` (a run's messages ran). */
async function passesRan(from: number, n: number): Promise<void> {
  await eventually(
    async () =>
      workerLogs()
        .slice(from)
        .filter((l) => l.msg === "pass").length >= n
        ? true
        : undefined,
    { timeoutMs: 30_000, intervalMs: 200, what: `${n} passes` },
  );
}

/**
 * Waits for the next wall-clock minute when a run's only messages were safety-net passes: the
 * sweep's slot is the minute, so every run in it sends the same objects' daily pass again (the
 * cron fires once a minute in production; here it fires back to back). Other files' objects in
 * the shared cluster land in a slot too.
 */
async function nextSlotIfSafetyNet(messages: readonly string[]): Promise<void> {
  if (messages.length === 0 || !messages.every((m) => m.endsWith(":safety-net"))) return;
  const minute = Math.floor(Date.now() / 60_000);
  await eventually(async () => (Math.floor(Date.now() / 60_000) > minute ? true : undefined), {
    timeoutMs: 65_000,
    intervalMs: 250,
    what: "the next sweep slot",
  });
}

/** Fires the cron until a run sends nothing, letting the passes of each run that did finish first. */
async function quietRun(): Promise<void> {
  const seen: string[] = [];
  for (let i = 0; i < 20; i++) {
    const from = workerLogs().length;
    const messages = sweptMessages((await cronRun()).sweep);
    if (messages.length === 0) return;
    seen.push(messages.join(","));
    await passesRan(from, messages.length);
    await nextSlotIfSafetyNet(messages);
  }
  throw new Error(`the cron kept sending messages: ${seen.join("; ")}`);
}

/**
 * `n` cron runs that send nothing, each with the API requests seen while it ran. A run that sends
 * messages is skipped once its passes ran; those passes are returned as `drift` where they are
 * this file's objects' (the safety net aside: a day's spread, a minute's share of the objects).
 * Other objects in the shared cluster (another file's, on their way out) only cost a skipped run.
 */
async function steadyRuns(
  n: number,
  ours: (key: string) => boolean,
): Promise<{ perRun: number[]; last: SeenRequest[]; drift: string[]; skipped: number; runs: string[] }> {
  const perRun: number[] = [];
  const runs: string[] = [];
  const drift: string[] = [];
  let last: SeenRequest[] = [];
  let skipped = 0;
  for (let i = 0; perRun.length < n; i++) {
    if (i >= 4 * n) throw new Error(`no ${n} quiet cron runs in ${i}: drift ${drift.join(", ")}`);
    const from = workerLogs().length;
    const run = await cronRun();
    const messages = sweptMessages(run.sweep);
    if (messages.length > 0) {
      skipped++;
      await passesRan(from, messages.length);
      for (const l of workerLogs().slice(from)) {
        if (l.msg === "pass" && ours(String(l.key)) && l.trigger !== "safety-net")
          drift.push(`${l.key} ${l.trigger}`);
      }
      await nextSlotIfSafetyNet(messages);
      continue;
    }
    perRun.push(run.requests.length);
    runs.push(JSON.stringify(countPaths(run.requests)));
    last = run.requests;
  }
  return { perRun, last, drift, skipped, runs };
}

function countPaths(requests: readonly SeenRequest[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of requests) {
    const key = `${r.method} ${r.path.split("?")[0]}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

describe("kubefn on Cloudflare Workers (workerd, real API server)", () => {
  it("answers health checks and refuses unauthenticated batches", async () => {
    expect((await harness.fetch("/healthz")).status).toBe(200);
    const res = await postEvents(
      JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] }),
      {},
    );
    expect(res.status).toBe(401);
  });

  it("a signed relay batch converges an External Proxy through the queue", async () => {
    const created = await kube.create<Proxy>(proxyResource, externalProxy("px-relay"));
    const res = await relay(created);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ source: "relay", enqueued: 1 });

    const p = await provisioned("px-relay");
    expect(p.status?.ip).toBe("203.0.113.7");
    expect(p.status?.observedGeneration).toBe(created.metadata.generation);
    expect(writtenByWorker(p)).toBe(true);
  });

  it("serves the fleet page behind the API token, with the Proxy in the phase the API server holds", async () => {
    const refused = await harness.fetch("/");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/^Basic /);
    const res = await harness.fetch("/", { headers: { authorization: `Bearer ${apiToken}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toMatch(/^default-src 'none'; style-src 'sha256-/);
    const phase = (await getProxy("px-relay")).status?.phase;
    expect(phase).toBeDefined();
    expect(await res.text()).toMatch(
      new RegExp(`<tr><td>${namespace}/px-relay</td><td><span class="c \\w+">${phase}</span>`),
    );
  });

  it("the API server's own audit event for the create converges an External Proxy", async () => {
    await kube.create<Proxy>(proxyResource, externalProxy("px-audit"));
    const event = await waitForAuditEvent(
      (e) =>
        e.verb === "create" &&
        e.stage === "ResponseComplete" &&
        e.objectRef?.resource === "proxies" &&
        e.objectRef.namespace === namespace &&
        e.objectRef.name === "px-audit",
    );
    const res = await postEvents(
      JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [event] }),
      {
        authorization: `Bearer ${auditToken}`,
      },
    );
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ source: "audit", enqueued: 1 });

    const p = await provisioned("px-audit");
    expect(writtenByWorker(p)).toBe(true);
  });

  it("steady state: a cron run sends no message and the same API requests for 5 and for 20 External Proxies (beside a Managed Proxy and a SubPool)", async () => {
    const names = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `steady-${from + i}`);
    const logs = workerLogs().length;
    const converge = async (created: string[]) => {
      for (const name of created) await kube.create<Proxy>(proxyResource, externalProxy(name));
      // No event: the cron alone finds them (drift reason generation) and their passes converge them.
      await cronRun();
      for (const name of created) await provisioned(name);
      await quietRun();
    };
    // Beside them in both windows: a Managed Proxy, whose Pod is in the provider list the drift
    // reads, and a SubPool, whose Namespace is listed (metadata only) per page of SubPools.
    const pool = `steady-${namespace}`;
    await kube.create<Proxy>(proxyResource, {
      ...externalProxy("steady-managed"),
      spec: { mode: "Managed", provider: "kubernetes" },
    } as Proxy);
    await kube.create(subPoolResource, {
      apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
      kind: "SubPool",
      metadata: { name: pool },
      spec: {
        exposure: { mode: "Internal" },
        storage: { size: "1Gi" },
        cpa: {
          image: "ghcr.io/subrelay/cpa:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
        cpaManager: {
          image: "ghcr.io/subrelay/cpa-manager:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
      },
    });
    // The pool's Pod turns ready on the StatefulSet controller's time: a change a pass must write,
    // so the windows start after it.
    await eventually(
      async () => {
        await cronRun();
        const sts = await kube
          .get<KubeObject>(Resources.StatefulSet, {
            namespace: subPoolNamespaceName(pool),
            name: `${pool}-cpa-manager`,
          })
          .catch(() => undefined);
        const ready = (sts?.status as { readyReplicas?: number } | undefined)?.readyReplicas === 1;
        return ready && (await getProxy("steady-managed")).status?.phase === "Ready" ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: `${pool}'s StatefulSet and steady-managed ready` },
    );
    await converge(names(0, 5));
    const ours = (key: string) => key.includes(`/${namespace}/`) || key.endsWith(`/${pool}`);
    const five = await steadyRuns(3, ours);
    await converge(names(5, 20));
    const twenty = await steadyRuns(3, ours);
    console.log(
      `worker steady state, requests per cron run: 5 External Proxies ${five.perRun.join("/")}, 20 ${twenty.perRun.join("/")}; ` +
        `drift messages ${five.drift.length}/${twenty.drift.length} (runs with messages skipped ${five.skipped}/${twenty.skipped}); ` +
        `requests of one run at 20: ${JSON.stringify(countPaths(twenty.last))}`,
    );
    expect(five.drift).toEqual([]);
    expect(twenty.drift).toEqual([]);
    expect(twenty.perRun, [...five.runs, ...twenty.runs].join("\n")).toEqual(five.perRun);
    // Lists only: no request names one Proxy.
    expect(twenty.last.filter((r) => r.method !== "GET" || !r.path.includes("limit="))).toEqual([]);
    // Every list the drift needs was allowed and answered (a failed list would leave it blind).
    expect(
      workerLogs()
        .slice(logs)
        .filter((l) => l.level === "error" && String(l.msg).startsWith("sweep")),
    ).toEqual([]);

    // Their finalizers are the Worker's to run.
    await kube.delete(proxyResource, { namespace, name: "steady-managed" });
    await kube.delete(subPoolResource, { name: pool });
    const gone = (get: Promise<unknown>) =>
      get.then(
        () => false,
        (err: unknown) => (isNotFound(err) ? true : Promise.reject(err)),
      );
    await eventually(
      async () => {
        await cronRun();
        return (await gone(getProxy("steady-managed"))) &&
          (await gone(kube.get(subPoolResource, { name: pool })))
          ? true
          : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: `steady-managed and ${pool} gone` },
    );
  }, 360_000);

  it("one event drives a Managed Proxy to Ready through delayed follow-ups, one more deletes it", async () => {
    const created = await kube.create<Proxy>(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "px-managed", namespace },
      spec: { mode: "Managed", provider: "kubernetes" },
    } as Proxy);
    expect((await relay(created)).status).toBe(202);

    const ready = await eventually(
      async () => {
        const p = await getProxy("px-managed");
        return p.status?.phase === "Ready" ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: "px-managed Ready" },
    );
    expect(condition(ready, "Provisioned")).toMatchObject({ status: "True", reason: "Created" });
    expect(ready.status?.ip).toMatch(/^127\./);
    expect(ready.metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
    const podsOf = async () =>
      (await kube.list(Resources.Pod, { namespace, labelSelector: `${ownerTagKey}=${created.metadata.uid}` }))
        .items;
    expect(await podsOf()).toHaveLength(1);
    const delayed = workerLogs().filter(
      (l) => l.msg === "pass" && String(l.key).endsWith("/px-managed") && Number(l.followUpSeconds) > 0,
    );
    expect(delayed.length).toBeGreaterThan(0);

    await kube.delete(proxyResource, { namespace, name: "px-managed" });
    expect((await relay(await getProxy("px-managed"), "MODIFIED")).status).toBe(202);
    await eventually(
      async () => {
        try {
          await getProxy("px-managed");
          return undefined;
        } catch (err) {
          return isNotFound(err) ? true : undefined;
        }
      },
      { timeoutMs: 60_000, intervalMs: 250, what: "px-managed gone" },
    );
    expect(await podsOf()).toEqual([]);
  });

  it("a gce Proxy: the GCE provider wired from vars and the GCE_CREDENTIALS secret creates the VM; deletion waits for it to be gone", async () => {
    const created = await kube.create<Proxy>(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "px-gce", namespace },
      spec: { mode: "Managed", provider: "gce" },
    } as Proxy);
    expect((await relay(created)).status).toBe(202);
    const ready = await eventually(
      async () => {
        const p = await getProxy("px-gce");
        return p.status?.phase === "Ready" ? p : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: "px-gce Ready" },
    );
    expect(ready.status?.providerID).toMatch(/^gce:\/\/kubefn-worker-e2e\/us-central1-a\/px-/);
    expect([...gce.instances.values()].map((i) => i.status)).toEqual(["RUNNING"]);

    // The VM takes its time to stop (until released below), whatever the machine's speed.
    gce.holdStopping = true;
    await kube.delete(proxyResource, { namespace, name: "px-gce" });
    expect((await relay(await getProxy("px-gce"), "MODIFIED")).status).toBe(202);
    let heldWhileStopping = false;
    await eventually(
      async () => {
        try {
          const p = await getProxy("px-gce");
          if (
            [...gce.instances.values()].some((i) => i.status === "STOPPING") &&
            p.metadata.finalizers?.length
          ) {
            heldWhileStopping = true;
            gce.holdStopping = false;
          }
          return undefined;
        } catch (err) {
          return isNotFound(err) ? true : undefined;
        }
      },
      { timeoutMs: 60_000, intervalMs: 100, what: "px-gce gone" },
    );
    expect(heldWhileStopping).toBe(true);
    expect(gce.instances.size).toBe(0);
    expect(gce.authFailures).toEqual([]);
  });

  it("with every event lost, the cron sweep alone converges a Proxy and probes it over connect()", async () => {
    await kube.create<Proxy>(
      proxyResource,
      externalProxy("px-sweep", {
        endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
        healthCheck: {
          probeURL: `http://127.0.0.1:${target.port}/`,
          expectedStatus: 200,
          intervalSeconds: 30,
          timeoutSeconds: 5,
          successThreshold: 1,
          failureThreshold: 3,
        },
      }),
    );
    await new Promise((r) => setTimeout(r, 1500));
    expect((await getProxy("px-sweep")).status?.conditions ?? []).toEqual([]);

    const result = await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
    expect(result.outcome).toBe("ok");

    const p = await provisioned("px-sweep");
    expect(p.status?.ip).toBe("127.0.0.1");
    const healthy = await eventually(
      async () => {
        const q = await getProxy("px-sweep");
        return condition(q, "Healthy")?.status === "True" ? q : undefined;
      },
      // The probe runs at the Proxy's phase within its 30 s interval (a probe-shard message).
      { timeoutMs: 60_000, intervalMs: 200, what: "px-sweep Healthy=True" },
    );
    expect(condition(healthy, "Healthy")?.reason).toBe("ProbeSucceeded");
    expect(healthy.status?.phase).toBe("Ready");
    expect(forwardProxy.requests).toContain(`http://127.0.0.1:${target.port}/`);
    expect(target.hits).toBeGreaterThan(0);
  });

  it("probes fan out as probe-shard messages: 12 due in the same second, never more than 6 in flight", async () => {
    // A target that answers after a second and counts the requests it holds at once.
    const slow = { hits: 0, active: 0, peak: 0 };
    const server = createServer((_req, res) => {
      slow.hits++;
      slow.active++;
      slow.peak = Math.max(slow.peak, slow.active);
      setTimeout(() => {
        slow.active--;
        res.writeHead(200).end("ok\n");
      }, 1000);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const slowPort = (server.address() as AddressInfo).port;
    try {
      // Names whose probe phase (FNV-1a of namespace/name, mod the 30 s interval) is second 2:
      // all twelve fall due together, in one shard, at 2 s and again at 32 s.
      const names: string[] = [];
      for (let i = 0; names.length < 12; i++) {
        if (fnv1a32(`${namespace}/fan-${i}`) % 30 === 2) names.push(`fan-${i}`);
      }
      for (const name of names) {
        await kube.create<Proxy>(
          proxyResource,
          externalProxy(name, {
            endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
            healthCheck: {
              probeURL: `http://127.0.0.1:${slowPort}/`,
              expectedStatus: 200,
              intervalSeconds: 30,
              timeoutSeconds: 5,
              successThreshold: 1,
              failureThreshold: 3,
            },
          }),
        );
      }
      await new Promise((r) => setTimeout(r, 1500));
      const mark = workerLogs().length;
      const result = await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
      expect(result.outcome).toBe("ok");
      // Their shard is delivered at their phase (second 2 or 32 of the minute): up to 30 s after
      // the cron run, then a second's answer.
      await eventually(async () => (slow.hits >= 12 ? true : undefined), {
        timeoutMs: 50_000,
        intervalMs: 200,
        what: "twelve probes at the slow target",
      });
      const shardLines = () =>
        workerLogs()
          .slice(mark)
          .filter((l) => l.msg === "job" && l.task === "probe");
      await eventually(async () => (shardLines().length > 0 ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: "a probe-shard message's log line",
      });
      const lines = workerLogs().slice(mark);
      const shards = shardLines();
      // The sweep line carries each task's non-zero counts under the task's name.
      const sweep = lines.find((l) => l.msg === "sweep") as
        | Record<string, Record<string, number>>
        | undefined;
      console.log(
        `worker probe shards: sweep planned ${JSON.stringify(sweep?.["proxy-health"])}; ` +
          `${shards.length} shard messages ran so far (${JSON.stringify(shards.map((l) => l.shard))}); ` +
          `slow target: ${slow.hits} probes, at most ${slow.peak} in flight`,
      );
      expect(sweep?.["proxy-health"]?.shards).toBeGreaterThanOrEqual(2);
      expect(shards.length).toBeGreaterThanOrEqual(1);
      expect(slow.peak).toBeLessThanOrEqual(6);
      expect(slow.peak).toBeGreaterThanOrEqual(2);
      for (const name of names.slice(0, 3)) {
        await eventually(
          async () => (condition(await getProxy(name), "Healthy")?.status === "True" ? true : undefined),
          { timeoutMs: 30_000, intervalMs: 300, what: `${name} Healthy=True` },
        );
      }
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 120_000);

  it("two queue invocations at once each probe with their own slots: the second is not cancelled as hung waiting for the first's, and nothing is lost", async () => {
    // A target that answers after 3 s, and records which Proxy each probe was for (`/<name>`).
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push((req.url ?? "").slice(1));
      setTimeout(() => res.writeHead(200).end("ok\n"), req.url?.startsWith("/hold-") ? 3000 : 0);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const hold = Array.from({ length: 6 }, (_, i) => `hold-${i}`);
    const wait = Array.from({ length: 8 }, (_, i) => `wait-${i}`);
    try {
      // Converged by events (no cron run here, so no probe shard but the ones sent below).
      for (const name of [...hold, ...wait]) {
        const created = await kube.create<Proxy>(
          proxyResource,
          externalProxy(name, {
            endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
            healthCheck: {
              probeURL: `http://127.0.0.1:${port}/${name}`,
              expectedStatus: 200,
              intervalSeconds: 30,
              timeoutSeconds: 5,
              successThreshold: 1,
              failureThreshold: 3,
            },
          }),
        );
        expect((await relay(created)).status).toBe(202);
      }
      const views = await Promise.all(
        [...hold, ...wait].map(async (name) => proxyProbeView(await provisioned(name))),
      );
      // Signed as the sweep signs its shards (an unsigned job is refused: issue 30).
      const mac = messageAuthenticatorFrom({ statusSealKey })!;
      const shard = async (id: string, objects: KubeObject[]) => {
        const message: Message = {
          kind: "job",
          v: ENVELOPE_VERSION,
          job: { controller: "proxy", task: "probe", slot: `e2e-${id}`, objects },
        };
        return { body: await mac.sign(message) };
      };
      const env = await harness.getWorker<{ KUBEFN_QUEUE: Queue }>().getEnv();
      const mark = workerLogs().length;
      // One shard whose 6 probes hold the Worker's 6 slots for 3 s (a batch of one, after the
      // batch timeout); while it runs, 8 more fill a batch that miniflare delivers at once, a
      // second invocation of the same isolate.
      await env.KUBEFN_QUEUE.sendBatch([await shard("hold", views.slice(0, hold.length))]);
      await eventually(
        async () => (seen.filter((n) => n.startsWith("hold-")).length >= 6 ? true : undefined),
        {
          timeoutMs: 10_000,
          intervalMs: 50,
          what: "the holding shard's six probes in flight",
        },
      );
      await env.KUBEFN_QUEUE.sendBatch(
        await Promise.all(views.slice(hold.length).map((v, i) => shard(`wait-${i}`, [v]))),
      );
      await eventually(async () => (wait.every((n) => seen.includes(n)) ? true : undefined), {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: `a probe of each of ${wait.join(", ")} (probed: ${[...new Set(seen)].join(", ")})`,
      });
      const jobs = () =>
        workerLogs()
          .slice(mark)
          .filter((l) => l.msg === "job" && String(l.key).includes("job:proxy/probe/e2e-"));
      await eventually(async () => (jobs().length >= 9 ? true : undefined), {
        timeoutMs: 15_000,
        what: "a job line for each of the 9 shards",
      });
      expect(jobs().every((l) => l.result === "done")).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await Promise.all(
        [...hold, ...wait].map((name) =>
          kube.delete(proxyResource, { namespace, name }).catch(() => undefined),
        ),
      );
    }
  }, 120_000);
});
