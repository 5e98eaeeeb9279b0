import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { proxyResource, testProxy } from "../../../../test/support/proxies.ts";
import { clusterNamespaceToken, namespaceToken, tokensEqual } from "../../../auth/index.ts";
import { type KubeObject, NetworkError } from "../../../kube/index.ts";
import { createStatusSeal } from "../../../runtime/core/index.ts";
import { leaseRoutes } from "../leases/routes.ts";
import { discoveryRoutes } from "./routes.ts";

// A cluster-wide crawler is an explicit choice: a JSON credential with namespaces "*".
const token = "s3cret-token-0123456789";
const apiToken = JSON.stringify([{ name: "crawler", token, namespaces: "*" }]);
const auth = { authorization: `Bearer ${token}` };

function setup() {
  const kube = new FakeKube();
  kube.seed(proxyResource, testProxy({ name: "slow", latencyMillis: 200, labels: { tier: "bulk" } }));
  kube.seed(proxyResource, testProxy({ name: "fast", latencyMillis: 10, labels: { tier: "fast" } }));
  kube.seed(proxyResource, testProxy({ name: "sick", phase: "Unhealthy", latencyMillis: 1 }));
  kube.seed(proxyResource, testProxy({ namespace: "other", name: "far", ip: "10.9.9.9" }));
  const { ctx, recorded } = fakeContext(kube);
  return { kube, recorded, app: discoveryRoutes(ctx, { apiToken }) };
}

describe("GET /v1/proxies", () => {
  it("lists Ready proxies fastest first, missing latency last", async () => {
    const { app } = setup();
    const res = await app.request("/v1/proxies", { headers: auth });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      items: [
        {
          cluster: "default",
          namespace: "crawl",
          name: "fast",
          ip: "10.0.0.1",
          port: 8080,
          scheme: "http",
          latencyMillis: 10,
          labels: { tier: "fast" },
        },
        {
          cluster: "default",
          namespace: "crawl",
          name: "slow",
          ip: "10.0.0.1",
          port: 8080,
          scheme: "http",
          latencyMillis: 200,
          labels: { tier: "bulk" },
        },
        {
          cluster: "default",
          namespace: "other",
          name: "far",
          ip: "10.9.9.9",
          port: 8080,
          scheme: "http",
          latencyMillis: null,
          labels: {},
        },
      ],
    });
  });

  it.each([
    ["?namespace=other", ["other/far"]],
    ["?labelSelector=tier%3Dfast", ["crawl/fast"]],
    ["?namespace=crawl&labelSelector=tier%20in%20(bulk,fast)", ["crawl/fast", "crawl/slow"]],
    ["?labelSelector=!tier", ["other/far"]],
    ["?namespace=empty", []],
  ])("filters %s", async (query, expected) => {
    const { app } = setup();
    const res = await app.request(`/v1/proxies${query}`, { headers: auth });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: { namespace: string; name: string }[] };
    expect(body.items.map((i) => `${i.namespace}/${i.name}`)).toEqual(expected);
  });

  it("answers 400 for a malformed labelSelector", async () => {
    const { app } = setup();
    const res = await app.request("/v1/proxies?labelSelector=a%20in%20(", { headers: auth });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: "BadRequest" });
  });

  it.each([
    ["no header", {}],
    ["a wrong token", { authorization: "Bearer wrong" }],
    ["a token prefix", { authorization: `Bearer ${apiToken.slice(0, -1)}` }],
    ["another scheme", { authorization: `Basic ${apiToken}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ])("answers 401 for %s", async (_, headers) => {
    const { app, kube } = setup();
    const res = await app.request("/v1/proxies", { headers });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(await res.json()).toEqual({ error: "Unauthorized" });
    expect(kube.calls).toEqual([]);
  });

  it("answers 503 with Retry-After when the API server is unreachable", async () => {
    const { app, kube, recorded } = setup();
    kube.fail("list", new NetworkError("connection refused", { status: 0, reason: "NetworkError" }));
    const res = await app.request("/v1/proxies", { headers: auth });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(recorded.logs.some((l) => l.level === "error")).toBe(true);
  });

  it("refuses to build with an empty token", () => {
    const { ctx } = fakeContext(new FakeKube());
    expect(() => discoveryRoutes(ctx, { apiToken: "" })).toThrow(/empty/);
  });
});

describe("tokensEqual", () => {
  it.each([
    ["abc", "abc", true],
    ["abc", "abd", false],
    ["ab", "abc", false],
    ["", "abc", false],
  ])("%j vs %j → %s", async (a, b, expected) => {
    expect(await tokensEqual(a, b)).toBe(expected);
  });
});

describe("mounted together, as the Node host does", () => {
  it("serves both APIs from one app, each with its auth and error mapping", async () => {
    const { kube } = setup();
    const { ctx } = fakeContext(kube);
    const app = new Hono()
      .route("/", discoveryRoutes(ctx, { apiToken }))
      .route("/", leaseRoutes(ctx, { apiToken }));
    expect((await app.request("/v1/proxies", { headers: auth })).status).toBe(200);
    const lease = await app.request("/v1/leases", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ holder: "a", ttlSeconds: 60 }),
    });
    expect(lease.status).toBe(201);
    expect((await app.request("/v1/leases", { method: "POST" })).status).toBe(401);
    kube.fail("list", new NetworkError("refused", { status: 0, reason: "NetworkError" }));
    const down = await app.request("/v1/leases", {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ holder: "a", ttlSeconds: 60 }),
    });
    expect(down.status).toBe(503);
    expect((await app.request("/elsewhere", { headers: auth })).status).toBe(404);
  });
});

describe("crawler credentials scoped to namespaces", () => {
  const credentials = JSON.stringify([
    { name: "team-crawl", token: "team-crawl-token-0123", namespaces: ["crawl"] },
    { name: "team-other", token: "team-other-token-0123", namespaces: ["other"] },
  ]);
  function scoped() {
    const kube = new FakeKube();
    kube.seed(proxyResource, testProxy({ name: "fast", latencyMillis: 10 }));
    kube.seed(proxyResource, testProxy({ namespace: "other", name: "far", ip: "10.9.9.9" }));
    const { ctx } = fakeContext(kube);
    return discoveryRoutes(ctx, { apiToken: credentials });
  }
  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  const names = async (res: Response) =>
    ((await res.json()) as { items: { namespace: string; name: string }[] }).items.map(
      (i) => `${i.namespace}/${i.name}`,
    );

  it("lists only the credential's namespaces, and refuses another namespace with 403", async () => {
    const app = scoped();
    expect(await names(await app.request("/v1/proxies", { headers: as("team-crawl-token-0123") }))).toEqual([
      "crawl/fast",
    ]);
    expect(await names(await app.request("/v1/proxies", { headers: as("team-other-token-0123") }))).toEqual([
      "other/far",
    ]);
    const res = await app.request("/v1/proxies?namespace=other", { headers: as("team-crawl-token-0123") });
    expect(res.status).toBe(403);
  });

  it.each([
    ["not JSON", "[nope"],
    ["a short token", JSON.stringify([{ name: "a", token: "short", namespaces: "*" }])],
    [
      "duplicate names",
      JSON.stringify([
        { name: "a", token: "a-token-0123456789", namespaces: "*" },
        { name: "a", token: "b-token-0123456789", namespaces: "*" },
      ]),
    ],
    ["no namespaces", JSON.stringify([{ name: "a", token: "a-token-0123456789", namespaces: [] }])],
  ])("a malformed credential setting (%s) fails at construction, never opens the API", (_what, setting) => {
    const { ctx } = fakeContext(new FakeKube());
    expect(() => discoveryRoutes(ctx, { apiToken: setting })).toThrow();
  });
});

describe("namespaces that no object can be in", () => {
  it.each(["..", ".", "Not_A_Label", "n".repeat(64)])(
    "GET /v1/proxies?namespace=%s is a 400 naming the rule, not a request to another path",
    async (namespace) => {
      const { app } = setup();
      const res = await app.request(`/v1/proxies?namespace=${encodeURIComponent(namespace)}`, {
        headers: auth,
      });
      expect(res.status).toBe(400);
      expect(JSON.stringify(await res.json())).toMatch(/DNS label/);
    },
  );

  it.each(["Not_A_Label", "a.b"])("PUT and DELETE /v1/leases/%s/x are 400", async (namespace) => {
    const kube = new FakeKube();
    const { ctx } = fakeContext(kube);
    const app = leaseRoutes(ctx, { apiToken });
    const path = `/v1/leases/${encodeURIComponent(namespace)}/proxy-x`;
    const headers = { ...auth, "content-type": "application/json" };
    const put = await app.request(path, { method: "PUT", headers, body: JSON.stringify({ holder: "h" }) });
    expect(put.status).toBe(400);
    const del = await app.request(`${path}?holder=h`, { method: "DELETE", headers });
    expect(del.status).toBe(400);
  });
});

describe("per-namespace crawler credentials, the default for a plain API token", () => {
  const secret = "api-secret-0123456789abcdef";
  function tenants() {
    const kube = new FakeKube();
    kube.seed(proxyResource, testProxy({ namespace: "team-a", name: "a1", latencyMillis: 200 }));
    // Tenant B's External proxy, the fastest in the cluster, whose health target B controls.
    kube.seed(
      proxyResource,
      testProxy({ namespace: "team-b", name: "bait", latencyMillis: 1, ip: "203.0.113.66" }),
    );
    const { ctx } = fakeContext(kube);
    const app = new Hono();
    app.route("/", discoveryRoutes(ctx, { apiToken: secret }));
    app.route("/", leaseRoutes(ctx, { apiToken: secret }));
    return app;
  }
  const get = async (app: Hono, path: string, token: string) => {
    const res = await app.request(path, { headers: { authorization: `Bearer ${token}` } });
    return {
      status: res.status,
      body: (await res.json()) as { items?: { namespace: string; name: string }[] },
    };
  };

  it("a crawler with namespace A's credential never receives namespace B's proxies, however it asks", async () => {
    const app = tenants();
    const tokenA = await namespaceToken(secret, "team-a");
    const all = await get(app, "/v1/proxies", tokenA);
    expect(all.status).toBe(200);
    expect(all.body.items?.map((i) => `${i.namespace}/${i.name}`)).toEqual(["team-a/a1"]);
    expect((await get(app, "/v1/proxies?namespace=team-b", tokenA)).status).toBe(403);
    const lease = await app.request("/v1/leases", {
      method: "POST",
      headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
      body: JSON.stringify({ holder: "w1", ttlSeconds: 30 }),
    });
    expect(lease.status).toBe(201);
    expect(((await lease.json()) as { lease: { proxy: { namespace: string } } }).lease.proxy.namespace).toBe(
      "team-a",
    );
    const leaseB = await app.request("/v1/leases", {
      method: "POST",
      headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
      body: JSON.stringify({ namespace: "team-b", holder: "w1", ttlSeconds: 30 }),
    });
    expect(leaseB.status).toBe(403);
  });

  it("the API secret itself is no crawler credential, and a token's namespace cannot be rewritten", async () => {
    const app = tenants();
    expect((await get(app, "/v1/proxies", secret)).status).toBe(401);
    const tokenA = await namespaceToken(secret, "team-a");
    const forged = tokenA.replace(".team-a.", ".team-b.");
    expect((await get(app, "/v1/proxies", forged)).status).toBe(401);
    // Minted under another secret: nothing.
    expect((await get(app, "/v1/proxies", await namespaceToken(`${secret}x`, "team-b"))).status).toBe(401);
    const tokenB = await namespaceToken(secret, "team-b");
    expect((await get(app, "/v1/proxies", tokenB)).body.items?.map((i) => i.name)).toEqual(["bait"]);
  });
});

describe("crawler credentials scoped to a cluster of a fleet (issue 35)", () => {
  const secret = "api-secret-0123456789abcdef";
  const eastToken = "east-crawler-token-0123456789";
  const listed = JSON.stringify([
    { name: "east-crawler", token: eastToken, namespaces: "*", clusters: ["east"] },
    { name: "ops", token: "ops-token-0123456789abcdef", namespaces: "*" },
  ]);
  /** The crawler API of one cluster's kubefn (its context names the cluster), over its own Proxies. */
  function clusterApi(cluster: string, apiToken: string) {
    const kube = new FakeKube();
    kube.seed(proxyResource, testProxy({ namespace: "crawl", name: `${cluster}-1`, latencyMillis: 5 }));
    const { ctx } = fakeContext(kube);
    const app = new Hono();
    app.route("/", discoveryRoutes({ ...ctx, cluster }, { apiToken }));
    app.route("/", leaseRoutes({ ...ctx, cluster }, { apiToken }));
    return { app, kube };
  }
  const get = (app: Hono, token: string) =>
    app.request("/v1/proxies", { headers: { authorization: `Bearer ${token}` } });
  const lease = (app: Hono, token: string) =>
    app.request("/v1/leases", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ holder: "w1", ttlSeconds: 30 }),
    });

  it("cluster A's credential is refused by cluster B's API (403, before any read), and sees A's Proxies named A's", async () => {
    const west = clusterApi("west", listed);
    const refused = await get(west.app, eastToken);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({
      error: "Forbidden",
      message: "this credential may not use cluster west",
    });
    expect((await lease(west.app, eastToken)).status).toBe(403);
    expect(west.kube.calls).toEqual([]);
    const east = clusterApi("east", listed);
    const seen = await get(east.app, eastToken);
    expect(seen.status).toBe(200);
    expect(((await seen.json()) as { items: unknown[] }).items).toEqual([
      expect.objectContaining({ cluster: "east", namespace: "crawl", name: "east-1" }),
    ]);
    expect((await lease(east.app, eastToken)).status).toBe(201);
    // A credential naming no cluster is the whole fleet's.
    expect((await get(west.app, "ops-token-0123456789abcdef")).status).toBe(200);
  });

  it("a namespace token minted for cluster A is refused by B, and its cluster cannot be rewritten", async () => {
    const tokenEast = await clusterNamespaceToken(secret, "east", "crawl");
    const east = clusterApi("east", secret);
    const west = clusterApi("west", secret);
    expect((await get(east.app, tokenEast)).status).toBe(200);
    expect((await get(west.app, tokenEast)).status).toBe(403);
    expect((await get(west.app, tokenEast.replace(".east.", ".west."))).status).toBe(401);
    expect((await get(west.app, await clusterNamespaceToken(secret, "west", "crawl"))).status).toBe(200);
  });

  it("a cluster list that is not DNS labels stops the start", () => {
    const bad = JSON.stringify([{ name: "c", token: eastToken, namespaces: "*", clusters: ["East!"] }]);
    expect(() => discoveryRoutes(fakeContext(new FakeKube()).ctx, { apiToken: bad })).toThrow(/cluster name/);
  });
});

describe("issue 30: only a status kubefn sealed is handed to crawlers", () => {
  /**
   * Three Ready Proxies: one whose status kubefn sealed, one whose sealed status a stolen kubefn
   * token then rewrote (the thief's address, no key to seal it), and one never sealed.
   */
  async function sealedWorld() {
    const seal = createStatusSeal("seal-key-0123456789abcdef0123456789");
    const kube = new FakeKube();
    const sealed = async (proxy: KubeObject) => {
      const status = proxy.status as Record<string, unknown>;
      status.seal = await seal.seal(proxy, status);
      return proxy;
    };
    kube.seed(proxyResource, await sealed(testProxy({ name: "kubefns", ip: "10.0.0.1" })));
    const forged = await sealed(testProxy({ name: "forged", ip: "10.0.0.2" }));
    (forged.status as Record<string, unknown>).ip = "198.51.100.66";
    kube.seed(proxyResource, forged);
    kube.seed(proxyResource, testProxy({ name: "unsealed", ip: "198.51.100.67" }));
    const { ctx, recorded } = fakeContext(kube);
    const app = new Hono()
      .route("/", discoveryRoutes({ ...ctx, seal }, { apiToken }))
      .route("/", leaseRoutes({ ...ctx, seal }, { apiToken }));
    return { app, kube, recorded, seal, ctx };
  }

  it("GET /v1/proxies leaves out a forged and an unsealed status, logged and counted", async () => {
    const { app, recorded } = await sealedWorld();
    const res = await app.request("/v1/proxies", { headers: auth });
    const body = (await res.json()) as { items: { name: string; ip: string }[] };
    expect(body.items.map((i) => `${i.name} ${i.ip}`)).toEqual(["kubefns 10.0.0.1"]);
    expect(recorded.counts).toEqual(
      expect.arrayContaining([
        { name: "kubefn_crawler_unsealed_proxies_total", labels: { verdict: "foreign" } },
        { name: "kubefn_crawler_unsealed_proxies_total", labels: { verdict: "unsealed" } },
      ]),
    );
  });

  it("a lease is never taken on a forged status, and one whose Proxy's status is forged later ends at renewal", async () => {
    const { app, kube, seal } = await sealedWorld();
    const take = async () =>
      app.request("/v1/leases", {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ holder: "w1", ttlSeconds: 60 }),
      });
    const first = await take();
    expect(first.status).toBe(201);
    const lease = ((await first.json()) as { lease: { id: string; proxy: { name: string; ip: string } } })
      .lease;
    expect(lease.proxy).toMatchObject({ name: "kubefns", ip: "10.0.0.1" });
    // Every other Ready proxy's status is forged or unsealed: none to lease.
    expect((await take()).status).toBe(409);

    // The thief rewrites the leased proxy's address with kubefn's token: the renewal ends the lease.
    const stored = await kube.get(proxyResource, { namespace: "crawl", name: "kubefns" });
    (stored.status as Record<string, unknown>).ip = "198.51.100.68";
    expect(await seal.verify(stored)).toBe("foreign");
    kube.seed(proxyResource, stored);
    const renew = await app.request(`/v1/leases/crawl/${lease.id.split("/").at(-1)}`, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ holder: "w1" }),
    });
    expect(renew.status).toBe(410);
  });
});
