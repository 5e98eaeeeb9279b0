/**
 * The proxy lease store, lease sweep and orphan GC against the devcluster: a real API server
 * arbitrates the Lease creates and resourceVersion-guarded updates, and its garbage collector
 * follows the Lease → Proxy ownerReference. Proxies are External and made Ready through the
 * status subresource, as the reconciler would.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import {
  type LeaseView,
  leaseRoutes,
  leaseSweepTask,
  type ProxyLease,
} from "../../shared/controllers/proxy/leases/index.ts";
import { orphanSweepTask } from "../../shared/controllers/proxy/orphans/index.ts";
import {
  createKubernetesProvider,
  nameFromUID,
  ownerTags,
  type Provider,
} from "../../shared/controllers/proxy/providers/index.ts";
import {
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  listAll,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Context } from "../../shared/runtime/index.ts";
import { runSweepTask } from "../../shared/runtime/sweep/index.ts";
import { consoleErrors, passContext } from "../support/pass-context.ts";

const namespace = `proxy-leases-${Date.now().toString(36)}`;
const crawlerToken = "integration-token";
// A cluster-wide crawler is an explicit choice: a JSON credential with namespaces "*".
const apiToken = JSON.stringify([{ name: "crawler", token: crawlerToken, namespaces: "*" }]);
let kube: Kube;
let ctx: Context;
let app: ReturnType<typeof leaseRoutes>;
/** The lease code's clock runs ahead of the wall clock by this much: expiry without waiting. */
let skewSeconds = 0;

beforeAll(async () => {
  kube = createKube(createNodeTransport(loadKubeConfig({ file: inject("kubeconfig") })));
  await installCrdsAndRbac(kube);
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  ctx = passContext(kube, {
    clock: { now: () => new Date(Date.now() + skewSeconds * 1000) },
    log: consoleErrors,
  });
  app = leaseRoutes(ctx, { apiToken });
});

afterAll(async () => {
  await kube?.delete(Resources.Namespace, { name: namespace }).catch(() => {});
});

async function createReadyProxy(name: string, latencyMillis = 50): Promise<KubeObject> {
  const created = await kube.create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace, labels: { pool: name } },
    spec: {
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" },
      healthCheck: { probeURL: "http://probe.example/" },
    },
  });
  await setPhase(name, "Ready", latencyMillis);
  return created;
}

async function setPhase(name: string, phase: "Ready" | "Unhealthy", latencyMillis = 50): Promise<void> {
  await kube.patchStatus(
    proxyResource,
    { namespace, name },
    { type: "merge", body: { status: { phase, ip: "203.0.113.7", latencyMillis } } },
  );
}

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const res = await app.request(path, {
    method,
    headers: { authorization: `Bearer ${crawlerToken}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: res.status === 204 ? undefined : await res.json() };
}

function acquire(holder: string, pool: string, ttlSeconds = 30) {
  return call("POST", "/v1/leases", { namespace, selector: `pool=${pool}`, holder, ttlSeconds });
}

async function leasesOf(name: string): Promise<ProxyLease[]> {
  return await listAll<ProxyLease>(kube, Resources.Lease, {
    namespace,
    labelSelector: `crawl.kubefn.dev/proxy=${name}`,
  });
}

async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("proxy leases on the devcluster", () => {
  it("two crawlers racing for the last Ready proxy: 20 concurrent acquires, exactly one lease", async () => {
    const proxy = await createReadyProxy("race");
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => acquire(`crawler-${i}`, "race")));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409).map((r) => r.body)).toHaveLength(19);
    const leases = await leasesOf("race");
    expect(leases).toHaveLength(1);
    const [lease] = leases;
    expect(lease?.metadata.name).toBe("proxy-race");
    expect(lease?.metadata.ownerReferences).toEqual([
      { apiVersion: "crawl.kubefn.dev/v1alpha1", kind: "Proxy", name: "race", uid: proxy.metadata.uid },
    ]);
    expect(lease?.spec?.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const winner = results.find((r) => r.status === 201)?.body as { lease: LeaseView };
    expect(lease?.spec?.holderIdentity).toBe(winner.lease.holder);
    expect(winner.lease.proxy).toEqual({
      namespace,
      name: "race",
      ip: "203.0.113.7",
      port: 3128,
      scheme: "http",
    });
  });

  it("renewing extends; after expiry another holder takes it and the old one cannot renew", async () => {
    await createReadyProxy("expiry");
    const first = await acquire("a", "expiry", 30);
    expect(first.status).toBe(201);
    const before = (first.body as { lease: LeaseView }).lease;
    skewSeconds += 20;
    const renewal = await call("PUT", `/v1/leases/${before.id}`, { holder: "a" });
    expect(renewal.status).toBe(200);
    const after = (renewal.body as { lease: LeaseView }).lease;
    expect(Date.parse(after.expiresAt) - Date.parse(before.expiresAt)).toBeGreaterThanOrEqual(19_000);
    skewSeconds += 20;
    expect((await acquire("b", "expiry")).status).toBe(409);
    skewSeconds += 15;
    // Ten crawlers race to take over the expired lease: the guarded update lets one through.
    const racers = await Promise.all(Array.from({ length: 10 }, (_, i) => acquire(`b-${i}`, "expiry")));
    const taken = racers.filter((r) => r.status === 201);
    expect(taken).toHaveLength(1);
    const winner = (taken[0]?.body as { lease: LeaseView } | undefined)?.lease.holder;
    const [stored] = await leasesOf("expiry");
    expect(stored?.spec?.holderIdentity).toBe(winner);
    expect(stored?.spec?.leaseTransitions).toBe(1);
    expect(await call("PUT", `/v1/leases/${before.id}`, { holder: "a" })).toEqual({
      status: 409,
      body: { error: "NotHolder" },
    });
  });

  it("release frees the proxy at once", async () => {
    await createReadyProxy("release");
    const got = await acquire("a", "release");
    const id = (got.body as { lease: LeaseView }).lease.id;
    expect((await acquire("b", "release")).status).toBe(409);
    expect((await call("DELETE", `/v1/leases/${id}?holder=b`)).status).toBe(409);
    expect((await call("DELETE", `/v1/leases/${id}?holder=a`)).status).toBe(204);
    expect(await leasesOf("release")).toEqual([]);
    expect((await acquire("b", "release")).status).toBe(201);
  });

  it("a proxy turned Unhealthy ends its lease: renew answers 410 and deletes it", async () => {
    await createReadyProxy("sick");
    const got = await acquire("a", "sick");
    const id = (got.body as { lease: LeaseView }).lease.id;
    await setPhase("sick", "Unhealthy");
    expect((await acquire("b", "sick")).status).toBe(409);
    expect(await call("PUT", `/v1/leases/${id}`, { holder: "a" })).toEqual({
      status: 410,
      body: { error: "ProxyNotReady" },
    });
    expect(await leasesOf("sick")).toEqual([]);
  });

  it("the lease sweep deletes the lease of an Unhealthy proxy and keeps a held one", async () => {
    await createReadyProxy("sweep-sick");
    await createReadyProxy("sweep-held");
    expect((await acquire("a", "sweep-sick")).status).toBe(201);
    expect((await acquire("a", "sweep-held")).status).toBe(201);
    await setPhase("sweep-sick", "Unhealthy");
    const proxies = await listAll(kube, proxyResource, { namespace });
    const counts = await runSweepTask(leaseSweepTask(), ctx, [proxies]);
    expect(counts.deleted).toBeGreaterThanOrEqual(1);
    expect(await leasesOf("sweep-sick")).toEqual([]);
    expect(await leasesOf("sweep-held")).toHaveLength(1);
  });

  it("deleting a proxy garbage-collects its Lease through the ownerReference", async () => {
    await createReadyProxy("gc");
    expect((await acquire("a", "gc")).status).toBe(201);
    await kube.delete(proxyResource, { namespace, name: "gc" });
    // The garbage collector learns of a freshly installed CRD at its next discovery sync (every
    // 30 s), so on a fresh devcluster this takes up to ~45 s; on a settled cluster, about a second.
    await eventually(
      async () => ((await leasesOf("gc")).length === 0 ? true : undefined),
      "the Lease to be collected",
      100_000,
    );
  }, 120_000);
});

describe("orphan GC on the devcluster", () => {
  /** The pod provider, seeing only this file's namespace (other files' Pods are not ours to judge). */
  function scopedProvider(): Provider {
    const inner = createKubernetesProvider({ kube });
    return {
      ...inner,
      listByTag: async (tag) =>
        (await inner.listByTag(tag)).filter((i) => i.id.startsWith(`kubernetes://${namespace}/`)),
    };
  }

  async function podExists(name: string): Promise<boolean> {
    try {
      const pod = await kube.get(Resources.Pod, { namespace, name });
      return !pod.metadata.deletionTimestamp;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  it("collects a tagged Pod without a Proxy, leaves its Proxy's Pod and an untagged Pod alone", async () => {
    const provider = scopedProvider();
    // Managed: an External Proxy never owns an instance (findOrphans).
    const owner = await kube.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "owner", namespace },
      spec: { mode: "Managed", provider: "kubernetes" },
    });
    const ownerUid = owner.metadata.uid ?? "";
    const orphanUid = crypto.randomUUID();
    const request = (uid: string) => ({
      name: nameFromUID(uid),
      namespace,
      instance: { image: "registry.example/forward-proxy:test" },
      tags: ownerTags(uid),
    });
    await provider.create(request(ownerUid));
    await provider.create(request(orphanUid));
    await kube.create(Resources.Pod, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "untagged", namespace, labels: { app: "crawler" } },
      spec: { containers: [{ name: "c", image: "registry.example/crawler:test" }] },
    });

    const proxies = await listAll(kube, proxyResource);
    const counts = await runSweepTask(
      orphanSweepTask({ providers: { kubernetes: provider }, graceSeconds: 0 }),
      ctx,
      [proxies],
    );
    expect(counts).toMatchObject({ orphans: 1, collected: 1, failed: 0 });
    await eventually(
      async () => ((await podExists(nameFromUID(orphanUid))) ? undefined : true),
      "the orphan to go",
    );
    expect(await podExists(nameFromUID(ownerUid))).toBe(true);
    expect(await podExists("untagged")).toBe(true);

    const again = await runSweepTask(
      orphanSweepTask({ providers: { kubernetes: provider }, graceSeconds: 0 }),
      ctx,
      [proxies],
    );
    expect(again).toMatchObject({ collected: 0 });
  });
});
