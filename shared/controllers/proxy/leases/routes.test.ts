import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { proxyResource, type TestProxy, testProxy } from "../../../../test/support/proxies.ts";
import { type KubeObject, Resources } from "../../../kube/index.ts";
import type { LeaseView, ProxyLease } from "./index.ts";
import { leaseRoutes } from "./routes.ts";

const leaseToken = "lease-token-0123456789";
// A cluster-wide crawler is an explicit choice: a JSON credential with namespaces "*".
const apiToken = JSON.stringify([{ name: "crawler", token: leaseToken, namespaces: "*" }]);
const t0 = new Date("2026-11-30T12:00:00Z");

function setup(...proxies: TestProxy[]) {
  let now = t0;
  const kube = new FakeKube(() => now);
  for (const p of proxies) kube.seed(proxyResource, testProxy(p));
  const { ctx } = fakeContext(kube);
  ctx.clock = { now: () => now };
  const app = leaseRoutes(ctx, { apiToken });
  const call = (method: string, path: string, body?: unknown) =>
    app.request(path, {
      method,
      headers: { authorization: `Bearer ${leaseToken}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return {
    kube,
    call,
    advance: (seconds: number) => {
      now = new Date(now.getTime() + seconds * 1000);
    },
    setPhase: (name: string, phase: "Ready" | "Unhealthy") => {
      const stored = kube.stored(proxyResource, { namespace: "crawl", name }) as KubeObject;
      kube.seed(proxyResource, {
        ...stored,
        status: { ...(stored.status as object), phase },
        metadata: { ...stored.metadata, resourceVersion: undefined },
      });
    },
    lease: (name: string) =>
      kube.stored(Resources.Lease, { namespace: "crawl", name }) as ProxyLease | undefined,
  };
}

async function acquire(call: ReturnType<typeof setup>["call"], holder: string, extra: object = {}) {
  const res = await call("POST", "/v1/leases", { holder, ttlSeconds: 30, ...extra });
  return { status: res.status, body: (await res.json()) as { lease: LeaseView; error?: string } };
}

describe("POST /v1/leases", () => {
  it("leases the fastest free Ready proxy", async () => {
    const { call, lease } = setup({ name: "slow", latencyMillis: 90 }, { name: "fast", latencyMillis: 5 });
    const first = await acquire(call, "crawler-a");
    expect(first.status).toBe(201);
    expect(first.body.lease).toEqual({
      id: "crawl/proxy-fast",
      proxy: { namespace: "crawl", name: "fast", ip: "10.0.0.1", port: 8080, scheme: "http" },
      // Bound to the credential: a plain token is the crawler "crawler".
      holder: "crawler/crawler-a",
      expiresAt: "2026-11-30T12:00:30.000Z",
    });
    expect(lease("proxy-fast")?.spec?.holderIdentity).toBe("crawler/crawler-a");
    const second = await acquire(call, "crawler-b");
    expect(second.body.lease.proxy.name).toBe("slow");
    const third = await acquire(call, "crawler-c");
    expect(third).toMatchObject({ status: 409, body: { error: "NoProxyAvailable" } });
  });

  it("20 crawlers racing for the last Ready proxy: exactly one lease", async () => {
    const { call, kube } = setup({ name: "last" }, { name: "sick", phase: "Unhealthy" });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => acquire(call, `crawler-${i}`)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(19);
    const leases = (await kube.list(Resources.Lease)).items;
    expect(leases).toHaveLength(1);
  });

  it("honours namespace and selector", async () => {
    const { call } = setup(
      { name: "eu", labels: { region: "eu" } },
      { name: "us", labels: { region: "us" } },
    );
    const got = await acquire(call, "a", { namespace: "crawl", selector: "region=us" });
    expect(got.body.lease.proxy.name).toBe("us");
    expect(await acquire(call, "b", { namespace: "elsewhere" })).toMatchObject({ status: 409 });
  });

  it("an expired lease goes to the next holder, counting a transition", async () => {
    const { call, advance, lease } = setup({ name: "only" });
    expect((await acquire(call, "a")).status).toBe(201);
    advance(29);
    expect((await acquire(call, "b")).status).toBe(409);
    advance(1);
    const taken = await acquire(call, "b");
    expect(taken.status).toBe(201);
    expect(taken.body.lease.holder).toBe("crawler/b");
    expect(lease("proxy-only")?.spec?.leaseTransitions).toBe(1);
  });

  it("a lease on a proxy turned Unhealthy and back is taken over", async () => {
    const { call, lease, setPhase } = setup({ name: "only" });
    await acquire(call, "a");
    setPhase("only", "Unhealthy");
    expect((await acquire(call, "b")).status).toBe(409);
    setPhase("only", "Ready");
    // The proxy is Ready again: "a" still holds an unexpired lease.
    expect((await acquire(call, "b")).status).toBe(409);
    expect(lease("proxy-only")?.spec?.holderIdentity).toBe("crawler/a");
  });

  it.each([
    ["no body", undefined],
    ["no holder", { ttlSeconds: 30 }],
    ["ttl below 5", { holder: "a", ttlSeconds: 4 }],
    ["ttl above 3600", { holder: "a", ttlSeconds: 3601 }],
    ["fractional ttl", { holder: "a", ttlSeconds: 7.5 }],
    ["malformed selector", { holder: "a", ttlSeconds: 30, selector: "a in (" }],
  ])("400 for %s", async (_, body) => {
    const { call, kube } = setup({ name: "only" });
    const res = await call("POST", "/v1/leases", body);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: "BadRequest" });
    expect(kube.writes()).toBe(0);
  });

  it("401 without the token", async () => {
    const { kube } = setup({ name: "only" });
    const { ctx } = fakeContext(kube);
    const res = await leaseRoutes(ctx, { apiToken }).request("/v1/leases", {
      method: "POST",
      body: JSON.stringify({ holder: "a", ttlSeconds: 30 }),
    });
    expect(res.status).toBe(401);
    const put = await leaseRoutes(ctx, { apiToken }).request("/v1/leases/crawl/proxy-only", {
      method: "PUT",
    });
    expect(put.status).toBe(401);
  });
});

describe("PUT /v1/leases/:namespace/:name", () => {
  it("the holder extends the lease; others get 409", async () => {
    const { call, advance } = setup({ name: "only" });
    await acquire(call, "a");
    advance(20);
    const res = await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "a" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { lease: LeaseView }).lease.expiresAt).toBe("2026-11-30T12:00:50.000Z");
    advance(20);
    expect((await acquire(call, "b")).status).toBe(409);
    const other = await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "b" });
    expect(other.status).toBe(409);
    expect(await other.json()).toEqual({ error: "NotHolder" });
  });

  it("may change the duration", async () => {
    const { call } = setup({ name: "only" });
    await acquire(call, "a");
    const res = await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "a", ttlSeconds: 600 });
    expect(((await res.json()) as { lease: LeaseView }).lease.expiresAt).toBe("2026-11-30T12:10:00.000Z");
  });

  it("410 ProxyNotReady on an Unhealthy proxy, and the lease is gone", async () => {
    const { call, setPhase, lease } = setup({ name: "only" });
    await acquire(call, "a");
    setPhase("only", "Unhealthy");
    const res = await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "a" });
    expect(res.status).toBe(410);
    expect(await res.json()).toEqual({ error: "ProxyNotReady" });
    expect(lease("proxy-only")).toBeUndefined();
  });

  it("410 when the proxy was deleted", async () => {
    const { call, kube, lease } = setup({ name: "only" });
    await acquire(call, "a");
    await kube.delete(proxyResource, { namespace: "crawl", name: "only" });
    expect((await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "a" })).status).toBe(410);
    expect(lease("proxy-only")).toBeUndefined();
  });

  it("404 for an unknown lease", async () => {
    const { call } = setup({ name: "only" });
    const res = await call("PUT", "/v1/leases/crawl/proxy-nope", { holder: "a" });
    expect(res.status).toBe(404);
  });

  it("the old holder cannot renew after a takeover", async () => {
    const { call, advance } = setup({ name: "only" });
    await acquire(call, "a");
    advance(31);
    await acquire(call, "b");
    expect((await call("PUT", "/v1/leases/crawl/proxy-only", { holder: "a" })).status).toBe(409);
  });
});

describe("DELETE /v1/leases/:namespace/:name", () => {
  it.each([
    [
      "query",
      (call: ReturnType<typeof setup>["call"]) => call("DELETE", "/v1/leases/crawl/proxy-only?holder=a"),
    ],
    [
      "body",
      (call: ReturnType<typeof setup>["call"]) =>
        call("DELETE", "/v1/leases/crawl/proxy-only", { holder: "a" }),
    ],
  ])("the holder releases (holder in the %s) and the proxy is free at once", async (_, release) => {
    const { call, lease } = setup({ name: "only" });
    await acquire(call, "a");
    const res = await release(call);
    expect(res.status).toBe(204);
    expect(lease("proxy-only")).toBeUndefined();
    expect((await acquire(call, "b")).status).toBe(201);
  });

  it("409 for another holder, 404 once gone, 400 without a holder", async () => {
    const { call } = setup({ name: "only" });
    await acquire(call, "a");
    expect((await call("DELETE", "/v1/leases/crawl/proxy-only?holder=b")).status).toBe(409);
    expect((await call("DELETE", "/v1/leases/crawl/proxy-only")).status).toBe(400);
    expect((await call("DELETE", "/v1/leases/crawl/proxy-only?holder=a")).status).toBe(204);
    expect((await call("DELETE", "/v1/leases/crawl/proxy-only?holder=a")).status).toBe(404);
  });
});

describe("attacks on the lease API", () => {
  const credentials = JSON.stringify([
    { name: "team-a", token: "team-a-token-0123456789", namespaces: ["crawl"] },
    { name: "team-b", token: "team-b-token-0123456789", namespaces: ["other"] },
  ]);
  function scoped(...proxies: TestProxy[]) {
    const kube = new FakeKube(() => t0);
    for (const p of proxies) kube.seed(proxyResource, testProxy(p));
    const { ctx } = fakeContext(kube);
    ctx.clock = { now: () => t0 };
    const app = leaseRoutes(ctx, { apiToken: credentials });
    const as = (team: "a" | "b") => async (method: string, path: string, body?: unknown) => {
      const res = await app.request(path, {
        method,
        headers: {
          authorization: `Bearer team-${team}-token-0123456789`,
          "content-type": "application/json",
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return {
        status: res.status,
        body: (await res.json().catch(() => null)) as { lease?: LeaseView } | null,
      };
    };
    return { kube, a: as("a"), b: as("b") };
  }

  it("a credential scoped to another namespace sees and leases nothing here", async () => {
    const { a, b } = scoped({ name: "only" });
    expect((await b("POST", "/v1/leases", { holder: "x", ttlSeconds: 30 })).status).toBe(409);
    expect((await b("POST", "/v1/leases", { holder: "x", ttlSeconds: 30, namespace: "crawl" })).status).toBe(
      403,
    );
    const mine = await a("POST", "/v1/leases", { holder: "x", ttlSeconds: 30 });
    expect(mine.status).toBe(201);
    expect(mine.body?.lease?.holder).toBe("team-a/x");
    // The same holder string from another credential is another holder, and out of scope anyway.
    expect((await b("PUT", "/v1/leases/crawl/proxy-only", { holder: "x" })).status).toBe(404);
    expect((await b("DELETE", "/v1/leases/crawl/proxy-only?holder=x")).status).toBe(404);
    expect((await a("PUT", "/v1/leases/crawl/proxy-only", { holder: "x" })).status).toBe(200);
  });

  it("holders are bound to the credential: asserting another crawler's holder string is not enough", async () => {
    const shared = JSON.stringify([
      { name: "one", token: "one-token-0123456789ab", namespaces: "*" },
      { name: "two", token: "two-token-0123456789ab", namespaces: "*" },
    ]);
    const kube = new FakeKube(() => t0);
    kube.seed(proxyResource, testProxy({ name: "only" }));
    const { ctx } = fakeContext(kube);
    ctx.clock = { now: () => t0 };
    const app = leaseRoutes(ctx, { apiToken: shared });
    const call = (token: string, method: string, path: string, body?: unknown) =>
      app.request(path, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    expect(
      (await call("one-token-0123456789ab", "POST", "/v1/leases", { holder: "h", ttlSeconds: 30 })).status,
    ).toBe(201);
    expect(
      (await call("two-token-0123456789ab", "PUT", "/v1/leases/crawl/proxy-only", { holder: "h" })).status,
    ).toBe(409);
    expect(
      (await call("two-token-0123456789ab", "DELETE", "/v1/leases/crawl/proxy-only?holder=h")).status,
    ).toBe(409);
    // Nor by asserting the stored, bound form.
    expect(
      (await call("two-token-0123456789ab", "DELETE", "/v1/leases/crawl/proxy-only?holder=one%2Fh")).status,
    ).toBe(409);
  });

  it.each([
    ["a node heartbeat", "kube-node-lease", "node-1", {}],
    ["a leader-election Lease named like a proxy's", "crawl", "proxy-only", {}],
    [
      "a Lease with kubefn's label but no Proxy owner",
      "crawl",
      "proxy-only",
      { "crawl.kubefn.dev/managed-by": "kubefn", "crawl.kubefn.dev/proxy": "only" },
    ],
  ])("never renews, releases or takes over %s", async (_what, namespace, name, labels) => {
    const { kube, a } = scoped({ name: "only" });
    const foreign = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { namespace, name, labels },
      spec: { holderIdentity: "team-a/x", leaseDurationSeconds: 1, renewTime: "2020-01-01T00:00:00.000000Z" },
    };
    kube.seed(Resources.Lease, foreign);
    const everywhere = JSON.stringify([
      { name: "team-a", token: "team-a-token-0123456789", namespaces: "*" },
    ]);
    const { ctx } = fakeContext(kube);
    ctx.clock = { now: () => t0 };
    const app = leaseRoutes(ctx, { apiToken: everywhere });
    const headers = { authorization: "Bearer team-a-token-0123456789", "content-type": "application/json" };
    const put = await app.request(`/v1/leases/${namespace}/${name}`, {
      method: "PUT",
      headers,
      body: JSON.stringify({ holder: "x", ttlSeconds: 3600 }),
    });
    expect(put.status).toBe(404);
    const del = await app.request(`/v1/leases/${namespace}/${name}?holder=x`, { method: "DELETE", headers });
    expect(del.status).toBe(404);
    if (namespace === "crawl") {
      // Acquiring the proxy meets the foreign Lease at its name and does not take it over.
      expect((await a("POST", "/v1/leases", { holder: "y", ttlSeconds: 30 })).status).toBe(409);
    }
    const after = kube.stored(Resources.Lease, { namespace, name }) as ProxyLease;
    expect(after.spec).toEqual(foreign.spec);
    expect(after.metadata.labels).toEqual(labels);
  });
});

describe("lease request bodies", () => {
  it("a body over 64 KiB is refused (413) after reading little more than that: a leaked crawler token cannot fill memory", async () => {
    const { kube } = setup({ name: "only" });
    const { ctx } = fakeContext(kube);
    const app = leaseRoutes(ctx, { apiToken });
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= 64 * 1024 * 1024) return controller.close();
        pulled += 16 * 1024;
        controller.enqueue(new Uint8Array(16 * 1024).fill(0x20));
      },
    });
    const res = await app.request("/v1/leases", {
      method: "POST",
      headers: { authorization: `Bearer ${leaseToken}`, "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(pulled).toBeLessThan(256 * 1024);
  });
});
