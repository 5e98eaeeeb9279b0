/**
 * The relay against the real devcluster: in-process, with the admin kubeconfig, posting to a
 * local intake (node:http) that verifies every batch's signature and schema.
 *
 * What this proves on the real API server: list + watch with bookmarks from the list's
 * resourceVersion; ADDED for new ConfigMaps, Secrets and Proxies (Secrets as metadata only); no
 * event for a Proxy status-only write or a ConfigMap label-only change; MODIFIED for a Proxy spec
 * change (generation) and a ConfigMap data change; MODIFIED for a StatefulSet's status write that
 * loses its ready replica (the readiness predicate, issue 33); delivery after intake answered 503 for a minute,
 * with the changes made meanwhile coalesced; and, after 410 Gone, a relist from the real server
 * whose diff emits exactly what changed during the gap (new, data-changed, deleted; not the
 * label-only change), then a real re-watch from the relist's resourceVersion.
 *
 * Staged: the 410 itself. A fresh devcluster's watch cache still covers resourceVersion "1" (it
 * replays history instead of answering 410; probed), and forcing etcd compaction is not exposed,
 * so the first watch's stream delivers the ERROR event in the API server's exact shape (Status,
 * reason Expired, code 410) through the WatchStream port; HTTP-410 and ERROR-event detection are
 * unit-tested in infra/relay/watcher.test.ts.
 */
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRelay, type Relay } from "../../infra/relay/relay.ts";
import { clientNodeWatchStream, type WatchStream } from "../../infra/relay/watch-stream.ts";
import { KindWatcher } from "../../infra/relay/watcher.ts";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBatch } from "../../shared/auth/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { Log, RelayEvent } from "../../shared/runtime/index.ts";
import { relayBatchSchema } from "../../shared/runtime/intake/index.ts";
import { eventually, kubeConfig, kubectl } from "../setup/cluster.ts";

const secret = "relay-integration-secret-0123456789";
const ns = `relay-${Math.random().toString(36).slice(2, 8)}`;
const quiet: Log = { info() {}, warn() {}, error: (m, f) => console.error(m, f) };

interface Delivery {
  at: number;
  raw: string;
  events: RelayEvent[];
}

/** A local intake: verifies signature and schema, records batches, answers 503 while `down`. */
function startIntake() {
  const state = { down: false, refused: 0, invalid: 0, deliveries: [] as Delivery[] };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      if (state.down) {
        state.refused++;
        res.writeHead(503).end('{"error":"down"}');
        return;
      }
      const raw = Buffer.concat(chunks).toString("utf8");
      const verdict = await verifyBatch(
        secret,
        raw,
        {
          signature: req.headers[SIGNATURE_HEADER] as string | undefined,
          timestamp: req.headers[TIMESTAMP_HEADER] as string | undefined,
        },
        Date.now() / 1000,
        300,
      );
      const parsed = relayBatchSchema.safeParse(JSON.parse(raw));
      if (!verdict.ok || !parsed.success) {
        state.invalid++;
        res.writeHead(verdict.ok ? 400 : 401).end();
        return;
      }
      state.deliveries.push({ at: Date.now(), raw, events: parsed.data.events });
      res.writeHead(202).end('{"accepted":true}');
    });
  });
  return new Promise<{ url: string; server: Server; state: typeof state }>((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/events`, server, state }),
    ),
  );
}

let kube: Kube;
let relay: Relay;
let intake: Awaited<ReturnType<typeof startIntake>>;

/** Events of this test's namespace delivered since index `from`. */
const delivered = (from = 0) =>
  intake.state.deliveries
    .slice(from)
    .flatMap((d) => d.events)
    .filter((e) => e.object.metadata.namespace === ns || e.object.metadata.name === ns);
const find = (from: number, resource: string, name: string, type?: RelayEvent["type"]) =>
  delivered(from).find(
    (e) => e.resource.resource === resource && e.object.metadata.name === name && (!type || e.type === type),
  );
const waitFor = (from: number, resource: string, name: string, type?: RelayEvent["type"]) =>
  eventually(async () => find(from, resource, name, type), {
    timeoutMs: 15_000,
    what: `${type ?? "an"} event for ${resource} ${name}`,
  });
const mark = () => intake.state.deliveries.length;

const configMap = (name: string, data: Record<string, string>, labels: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns, labels },
  data,
});
const proxy = (name: string, port: number) => ({
  apiVersion: `${proxyResource.group}/${proxyResource.version}`,
  kind: proxyResource.kind,
  metadata: { name, namespace: ns },
  spec: { mode: "External", endpoint: { host: "10.0.0.1", port } },
});

beforeAll(async () => {
  const crd = fileURLToPath(new URL("../../infra/crds/proxies.crawl.kubefn.dev.yaml", import.meta.url));
  const applied = await kubectl(["apply", "-f", "-"], readFileSync(crd, "utf8"));
  expect(applied.code, applied.stderr).toBe(0);
  const established = await kubectl([
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    `crd/${proxyResource.resource}.${proxyResource.group}`,
  ]);
  expect(established.code, established.stderr).toBe(0);

  const kc = kubeConfig();
  kube = createKube(createNodeTransport(kc));
  await kube.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  intake = await startIntake();
  relay = createRelay({
    kinds: [
      { resource: proxyResource, predicate: "spec" },
      { resource: Resources.ConfigMap, predicate: "payload" },
      { resource: Resources.Secret, predicate: "payload" },
      { resource: Resources.StatefulSet, predicate: "readiness" },
    ],
    kube,
    stream: clientNodeWatchStream(kc, { timeoutSeconds: 60 }),
    intakeUrl: intake.url,
    secret,
    batch: { maxEvents: 50, maxDelayMs: 200 },
    bufferSize: 1000,
    backoff: { baseMs: 200, maxMs: 1000 },
    log: quiet,
  });
  relay.start();
  await eventually(async () => (relay.synced() ? true : undefined), { what: "relay synced" });
});

afterAll(async () => {
  await relay?.stop();
  await new Promise((r) => intake?.server.close(r));
  await kube?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
});

describe("relay against the devcluster", () => {
  it("serves /healthz once every kind is listed, and /metrics", async () => {
    const health = await relay.app.request("/healthz");
    expect(health.status).toBe(200);
    const body = (await health.json()) as { ok: boolean; kinds: { resource: string; synced: boolean }[] };
    expect(body.ok).toBe(true);
    expect(body.kinds.map((k) => k.resource)).toEqual([
      `${proxyResource.resource}.${proxyResource.group}`,
      "configmaps",
      "secrets",
      "statefulsets.apps",
    ]);
    const metrics = await relay.app.request("/metrics");
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("kubefn_relay_objects");
  });

  it("delivers a signed RelayBatch with a new ConfigMap, Proxy and Secret (the Secret as metadata only)", async () => {
    const from = mark();
    await kube.create(Resources.ConfigMap, configMap("settings", { level: "1" }));
    await kube.create(proxyResource, proxy("px-a", 3128));
    await kube.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "cloud-init", namespace: ns },
      stringData: { "user-data": "top-secret-payload" },
    });
    const cm = await waitFor(from, "configmaps", "settings", "ADDED");
    expect(cm.resource).toEqual({ group: "", version: "v1", resource: "configmaps" });
    // Metadata only: the relay never forwards a ConfigMap's data (nor any spec or status).
    expect(Object.keys(cm.object).sort()).toEqual(["apiVersion", "kind", "metadata"]);
    const px = await waitFor(from, "proxies", "px-a", "ADDED");
    expect(px.resource).toEqual({
      group: "crawl.kubefn.dev",
      version: proxyResource.version,
      resource: "proxies",
    });
    expect(px.object.metadata.generation).toBe(1);
    const sec = await waitFor(from, "secrets", "cloud-init", "ADDED");
    expect(Object.keys(sec.object).sort()).toEqual(["apiVersion", "kind", "metadata"]);
    const raw = intake.state.deliveries.map((d) => d.raw).join("\n");
    expect(raw).not.toContain(Buffer.from("top-secret-payload").toString("base64"));
    expect(raw).not.toContain("top-secret-payload");
    expect(intake.state.invalid).toBe(0);
  });

  it("drops a Proxy status-only write, forwards its spec change", async () => {
    await waitFor(0, "proxies", "px-a", "ADDED");
    const from = mark();
    await kube.patchStatus(
      proxyResource,
      { namespace: ns, name: "px-a" },
      {
        type: "merge",
        body: { status: { phase: "Ready", ip: "10.0.0.1" } },
      },
    );
    // Same kind, same watch stream: once px-sentinel arrives, the status write was judged.
    await kube.create(proxyResource, proxy("px-sentinel", 1080));
    await waitFor(from, "proxies", "px-sentinel", "ADDED");
    expect(find(from, "proxies", "px-a")).toBeUndefined();

    const from2 = mark();
    await kube.patch(
      proxyResource,
      { namespace: ns, name: "px-a" },
      {
        type: "merge",
        body: { spec: { endpoint: { port: 3129 } } },
      },
    );
    const modified = await waitFor(from2, "proxies", "px-a", "MODIFIED");
    expect(modified.object.metadata.generation).toBe(2);
  });

  it("issue 33: forwards a StatefulSet's readiness as it changes (status writes at the same generation)", async () => {
    await kube.create(Resources.StatefulSet, {
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name: "web", namespace: ns },
      spec: {
        replicas: 1,
        serviceName: "web",
        selector: { matchLabels: { app: "web" } },
        template: {
          metadata: { labels: { app: "web" } },
          spec: { containers: [{ name: "c", image: "registry.example/web:1" }] },
        },
      },
    });
    await waitFor(0, "statefulsets", "web", "ADDED");
    const ready = (want: number) =>
      eventually(
        async () => {
          const sts = await kube.get<{ status?: { readyReplicas?: number } } & KubeObject>(
            Resources.StatefulSet,
            { namespace: ns, name: "web" },
          );
          return (sts.status?.readyReplicas ?? 0) === want ? sts : undefined;
        },
        { timeoutMs: 60_000, what: `web with ${want} ready replicas` },
      );
    await ready(1);

    // The kubelet reports its Pod not ready: the StatefulSet loses its ready replica, by a status
    // write at generation 1 (a spec predicate drops it).
    const pod = await kube.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      Resources.Pod,
      { namespace: ns, name: "web-0" },
    );
    const conditions = (pod.status?.conditions ?? []).map((c) =>
      c.type === "Ready" || c.type === "ContainersReady" ? { ...c, status: "False" } : c,
    );
    await kube.patchStatus(
      Resources.Pod,
      { namespace: ns, name: "web-0" },
      { type: "merge", body: { status: { conditions } } },
    );
    const notReady = await ready(0);
    const lost = await eventually(
      async () =>
        delivered(0).find(
          (e) =>
            e.resource.resource === "statefulsets" &&
            e.object.metadata.name === "web" &&
            e.type === "MODIFIED" &&
            Number(e.object.metadata.resourceVersion) >= Number(notReady.metadata.resourceVersion),
        ),
      { timeoutMs: 15_000, what: "the MODIFIED event of web's lost ready replica" },
    );
    expect(lost.object.metadata.generation).toBe(1);
    // Marked as readiness alone: intake makes it a look at the owner's readiness, not a whole pass.
    expect(lost.readinessOnly).toBe(true);
  });

  it("drops a ConfigMap label-only change, forwards a data change", async () => {
    await waitFor(0, "configmaps", "settings", "ADDED");
    const from = mark();
    await kube.patch(
      Resources.ConfigMap,
      { namespace: ns, name: "settings" },
      {
        type: "merge",
        body: { metadata: { labels: { team: "platform" }, annotations: { note: "x" } } },
      },
    );
    await kube.create(Resources.ConfigMap, configMap("cm-sentinel", {}));
    await waitFor(from, "configmaps", "cm-sentinel", "ADDED");
    expect(find(from, "configmaps", "settings")).toBeUndefined();

    const from2 = mark();
    await kube.patch(
      Resources.ConfigMap,
      { namespace: ns, name: "settings" },
      {
        type: "merge",
        body: { data: { level: "2" } },
      },
    );
    const modified = await waitFor(from2, "configmaps", "settings", "MODIFIED");
    expect(modified.object.data).toBeUndefined();
  });

  it("while intake answers 503, keeps retrying and coalescing; delivers after it recovers", async () => {
    intake.state.down = true;
    const refusedBefore = intake.state.refused;
    const from = mark();
    // The first change becomes the batch in flight (retried as it is) ...
    await kube.create(Resources.ConfigMap, configMap("outage-first", { v: "0" }));
    await eventually(async () => (intake.state.refused > refusedBefore ? true : undefined), {
      what: "a refused attempt",
    });
    // ... the next ones wait in the buffer and coalesce per key.
    await kube.create(Resources.ConfigMap, configMap("outage-hot", { v: "0" }));
    for (let v = 1; v <= 5; v++) {
      await kube.patch(
        Resources.ConfigMap,
        { namespace: ns, name: "outage-hot" },
        {
          type: "merge",
          body: { data: { v: String(v) } },
        },
      );
    }
    await kube.create(Resources.ConfigMap, configMap("outage-other", { v: "0" }));
    // Three refused attempts (the backoff doubles from 1 s), and nothing delivered meanwhile.
    await eventually(async () => (intake.state.refused - refusedBefore >= 3 ? true : undefined), {
      timeoutMs: 60_000,
      what: "three refused attempts",
    });
    expect(mark()).toBe(from);
    const recoveredAt = Date.now();
    intake.state.down = false;

    // The next retry may be up to one backoff cap (30 s) away.
    const afterOutage = { timeoutMs: 45_000, what: "delivery after the outage" };
    await eventually(async () => find(from, "configmaps", "outage-first", "ADDED"), afterOutage);
    await eventually(async () => find(from, "configmaps", "outage-other", "ADDED"), afterOutage);
    const hot = delivered(from).filter((e) => e.object.metadata.name === "outage-hot");
    expect(hot).toHaveLength(1);
    expect(hot[0]).toMatchObject({ type: "ADDED" });
    const live = await kube.get(Resources.ConfigMap, { namespace: ns, name: "outage-hot" });
    expect(hot[0]!.object.metadata.resourceVersion).toBe(live.metadata.resourceVersion);
    expect(intake.state.deliveries[from]!.at).toBeGreaterThanOrEqual(recoveredAt);
    expect(relay.metrics.value("kubefn_relay_send_attempts_total", { result: "503" })).toBeGreaterThanOrEqual(
      3,
    );
  }, 150_000);

  it("410 Gone (ERROR event) makes the watcher relist from the real server and emit the gap's diff", async () => {
    await kube.create(Resources.ConfigMap, configMap("gap-change", { v: "1" }));
    await kube.create(Resources.ConfigMap, configMap("gap-doomed", { v: "1" }));
    await kube.create(Resources.ConfigMap, configMap("gap-relabel", { v: "1" }));
    const real = clientNodeWatchStream(kubeConfig(), { timeoutSeconds: 60 });
    let calls = 0;
    let gapEnd = "";
    // The first watch (after the real list) is where the gap happens: the changes are made on the
    // real server, then the stream answers as the API server does when the resourceVersion has
    // been compacted away. Later watches are real.
    const stream: WatchStream = {
      async watch(resource, rv, onEvent, signal) {
        calls++;
        if (calls > 1) return real.watch(resource, rv, onEvent, signal);
        await kube.create(Resources.ConfigMap, configMap("gap-new", { v: "1" }));
        await kube.patch(
          Resources.ConfigMap,
          { namespace: ns, name: "gap-change" },
          {
            type: "merge",
            body: { data: { v: "2" } },
          },
        );
        await kube.patch(
          Resources.ConfigMap,
          { namespace: ns, name: "gap-relabel" },
          {
            type: "merge",
            body: { metadata: { labels: { only: "labels" } } },
          },
        );
        await kube.delete(Resources.ConfigMap, { namespace: ns, name: "gap-doomed" });
        gapEnd = (await kube.list(Resources.ConfigMap, { namespace: ns, limit: 1 })).resourceVersion;
        onEvent({
          type: "ERROR",
          object: {
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: `too old resource version: ${rv} (${gapEnd})`,
            reason: "Expired",
            code: 410,
          },
        });
      },
    };
    const emitted: RelayEvent[] = [];
    const metrics = new PrometheusMetrics();
    const watcher = new KindWatcher({
      kind: { resource: Resources.ConfigMap, predicate: "payload" },
      kube,
      stream,
      emit: (e) => emitted.push(e),
      log: quiet,
      metrics,
    });
    const stop = new AbortController();
    const running = watcher.run(stop.signal);
    try {
      await eventually(
        async () =>
          metrics.value("kubefn_relay_relists_total", { resource: "configmaps" }) ? true : undefined,
        {
          what: "a relist after 410",
        },
      );
      await eventually(async () => (calls >= 2 ? true : undefined), {
        what: "the re-watch after the relist",
      });
    } finally {
      stop.abort();
      await running;
    }
    // The relist took the server's current resourceVersion, and the watch resumed from it.
    expect(Number(watcher.resourceVersion)).toBeGreaterThanOrEqual(Number(gapEnd));
    const mine = emitted
      .filter((e) => e.object.metadata.namespace === ns && e.object.metadata.name.startsWith("gap-"))
      .map((e) => `${e.type} ${e.object.metadata.name}`)
      .sort();
    expect(mine).toEqual(["ADDED gap-new", "DELETED gap-doomed", "MODIFIED gap-change"]);
  });
});
