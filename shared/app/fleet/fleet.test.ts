import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { proxyResource, testProxy } from "../../../test/support/proxies.ts";
import { siteResource } from "../../controllers/site/api.ts";
import { subPoolResource } from "../../controllers/subpool/api.ts";
import { ForbiddenError, type KubeObject, Resources } from "../../kube/index.ts";
import type { PassResult } from "../../runtime/index.ts";
import type { FleetPageAccess } from "../settings.ts";
import { PassHistory } from "./pass-history.ts";
import { cachedFleet, type FleetView, readFleet } from "./read.ts";
import { fleetCss } from "./render.ts";
import { fleetGroup, fleetPage, groupedFleetPage } from "./routes.ts";
import { stateOf } from "./state.ts";

const now = new Date("2026-11-30T12:00:00Z");
const sources = [
  { controller: "proxy", resource: proxyResource },
  { controller: "subpool", resource: subPoolResource },
  { controller: "site", resource: siteResource },
];

const cond = (type: string, status: string, reason = "R", at = "2026-11-30T11:00:00Z", message = "") => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: at,
});

function object(
  status: Record<string, unknown> | undefined,
  extra: Partial<KubeObject["metadata"]> = {},
): KubeObject {
  return { apiVersion: "x/v1", kind: "X", metadata: { name: "o", ...extra }, ...(status ? { status } : {}) };
}

describe("stateOf", () => {
  it.each([
    ["no status yet", undefined, {}, "New", "unknown", undefined],
    ["phase Ready", { phase: "Ready" }, {}, "Ready", "good", undefined],
    ["phase Provisioning", { phase: "Provisioning" }, {}, "Provisioning", "busy", undefined],
    [
      "phase Failed explained by the latest condition",
      {
        phase: "Failed",
        conditions: [
          cond("Provisioned", "False", "Pending", "2026-11-30T10:00:00Z"),
          cond("PermanentError", "True", "UnknownProvider", "2026-11-30T11:00:00Z"),
        ],
      },
      {},
      "Failed",
      "bad",
      "UnknownProvider",
    ],
    ["phase Unhealthy", { phase: "Unhealthy" }, {}, "Unhealthy", "bad", undefined],
    [
      "phase Failed whose provider was refused in the second the Proxy was first seen",
      {
        phase: "Failed",
        conditions: [
          cond("PermanentError", "True", "UnknownProvider", "2026-11-30T10:00:00Z"),
          cond("Provisioned", "False", "PermanentError", "2026-11-30T10:00:00Z"),
        ],
      },
      {},
      "Failed",
      "bad",
      "UnknownProvider",
    ],
    [
      "phase Unhealthy whose probe failed in the second it was provisioned",
      {
        phase: "Unhealthy",
        conditions: [
          cond("Provisioned", "True", "ExternalEndpoint", "2026-11-30T10:00:00Z"),
          cond("Healthy", "False", "ProbeFailed", "2026-11-30T10:00:00Z"),
        ],
      },
      {},
      "Unhealthy",
      "bad",
      "ProbeFailed",
    ],
    [
      "being deleted wins over the phase",
      { phase: "Ready" },
      { deletionTimestamp: "2026-11-30T11:59:00Z" },
      "Deleting",
      "busy",
      undefined,
    ],
    ["Ready=True", { conditions: [cond("Ready", "True", "AllReady")] }, {}, "Ready", "good", "AllReady"],
    [
      "Ready=False",
      { conditions: [cond("Ready", "False", "WaitingForGateway")] },
      {},
      "NotReady",
      "busy",
      "WaitingForGateway",
    ],
    [
      "Ready=Unknown",
      { conditions: [cond("Ready", "Unknown", "Suspended")] },
      {},
      "Unknown",
      "unknown",
      "Suspended",
    ],
    [
      "no Ready condition, every component True (a Site)",
      { conditions: [cond("NetReady", "True"), cond("StorageReady", "True")] },
      {},
      "Ready",
      "good",
      undefined,
    ],
    [
      "no Ready condition, one component False",
      { conditions: [cond("NetReady", "True"), cond("StorageReady", "False", "ApplyFailed")] },
      {},
      "NotReady",
      "busy",
      "StorageReady: ApplyFailed",
    ],
    [
      "conditions that are not conditions are ignored",
      { conditions: [1, "x", { type: 3 }] },
      {},
      "New",
      "unknown",
      undefined,
    ],
  ])("%s", (_, status, meta, state, tone, reason) => {
    const s = stateOf(object(status, meta));
    expect([s.state, s.tone, s.reason]).toEqual([state, tone, reason]);
  });

  it("changedAt is the latest transition of any condition", () => {
    const s = stateOf(
      object({
        conditions: [
          cond("A", "True", "R", "2026-11-30T09:00:00Z"),
          cond("B", "True", "R", "2026-11-30T10:30:00Z"),
        ],
      }),
    );
    expect(s.changedAt).toBe("2026-11-30T10:30:00Z");
  });
});

const pass = (i: number): PassResult => ({
  key: `proxy/ns/p${i}`,
  result: "done",
  trigger: "audit",
  absent: false,
  wroteStatus: false,
  durationMs: i,
});

describe("PassHistory", () => {
  it("keeps the last `capacity` passes, newest first", () => {
    const h = new PassHistory(3);
    for (let i = 1; i <= 5; i++) h.record(pass(i), new Date(now.getTime() + i));
    expect(h.recent().map((p) => p.key)).toEqual(["proxy/ns/p5", "proxy/ns/p4", "proxy/ns/p3"]);
    const partial = new PassHistory(3);
    partial.record(pass(1), now);
    partial.record(pass(2), now);
    expect(partial.recent().map((p) => p.key)).toEqual(["proxy/ns/p2", "proxy/ns/p1"]);
  });
});

function seededKube(proxies: number): FakeKube {
  const kube = new FakeKube();
  for (let i = 0; i < proxies; i++) {
    kube.seed(
      proxyResource,
      testProxy({
        name: `p${String(i).padStart(3, "0")}`,
        phase: i % 10 === 0 ? "Failed" : "Ready",
        latencyMillis: i * 7,
      }),
    );
  }
  kube.seed(subPoolResource, {
    apiVersion: "kubefn.dev/v1",
    kind: "SubPool",
    metadata: { name: "pool-a" },
    status: { conditions: [cond("Ready", "True", "AllReady")] },
  });
  return kube;
}

describe("readFleet", () => {
  it("counts every object by state, lists those needing attention first, and bins latencies", async () => {
    const view = await readFleet(seededKube(100), sources, () => now, { shownPerKind: 12 });
    const proxies = view.kinds.find((k) => k.controller === "proxy")!;
    expect(proxies.total).toBe(100);
    expect(proxies.states).toEqual([
      { state: "Ready", tone: "good", count: 90 },
      { state: "Failed", tone: "bad", count: 10 },
    ]);
    expect(proxies.shown.map((o) => o.state)).toEqual([
      ...Array(10).fill("Failed"),
      "Ready",
      "Ready",
      "Ready",
    ]);
    expect(view.kinds.find((k) => k.controller === "subpool")).toMatchObject({
      total: 1,
      states: [{ state: "Ready", count: 1 }],
    });
    expect(view.kinds.find((k) => k.controller === "site")).toMatchObject({ total: 0, shown: [] });
    expect(view.latency.probed).toBe(100);
    expect(view.latency.counts.reduce((a, b) => a + b)).toBe(100);
    // 0, 7 ≤10; 14, 21 ≤25; 28 … 49 ≤50 (4); 56 … 98 ≤100 (7); 105 … 245 ≤250 (21); 252 … 497 ≤500 (36); 504 … 693 ≤1000 (28)
    expect(view.latency.counts).toEqual([2, 2, 4, 7, 21, 36, 28, 0, 0]);
    expect(view.latency.maxMillis).toBe(693);
    expect(view.lists).toBe(3);
  });

  it("lists the latest to change first, a bounded few of each", async () => {
    const kube = new FakeKube();
    for (let i = 0; i < 40; i++) {
      const at = `2026-11-30T10:${String(i).padStart(2, "0")}:00Z`;
      kube.seed(proxyResource, {
        ...testProxy({ name: `p${i}` }),
        status: { phase: i % 2 ? "Ready" : "Failed", conditions: [cond("Healthy", "True", "R", at)] },
      });
    }
    const [proxies] = (await readFleet(kube, sources.slice(0, 1), () => now, { shownPerKind: 4 })).kinds;
    expect(proxies!.shown.map((o) => o.name)).toEqual(["p38", "p36", "p34", "p32", "p39"]);
  });

  it("sends only list requests, from the watch cache, one per page per kind, and never reads a Secret", async () => {
    const kube = seededKube(5);
    kube.seed(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { namespace: "crawl", name: "cloud-init" },
      data: { userData: btoa("password=hunter2") },
    });
    await readFleet(kube, sources, () => now);
    expect(kube.calls.map((c) => `${c.method} ${c.resource}`).sort()).toEqual([
      "list proxies",
      "list sites",
      "list subpools",
    ]);
  });

  it("a kind whose list fails shows its reason; the others still show", async () => {
    const kube = seededKube(3);
    kube.fail(
      "list",
      new ForbiddenError('proxies is forbidden: User "x" cannot list', { status: 403, reason: "Forbidden" }),
    );
    const view = await readFleet(kube, sources, () => now);
    const failed = view.kinds.filter((k) => k.error);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.error).toBe("Forbidden");
    expect(view.kinds.filter((k) => !k.error).map((k) => k.controller)).toHaveLength(2);
  });
});

describe("cachedFleet", () => {
  it("views within the TTL, and views arriving during a read, share one read", async () => {
    let t = 0;
    let reads = 0;
    const view = {
      kinds: [],
      latency: { bounds: [], counts: [], probed: 0 },
      lists: 3,
      readAt: now,
    } as FleetView;
    const fleet = cachedFleet(
      async () => {
        reads++;
        await new Promise((r) => setTimeout(r, 5));
        return view;
      },
      5000,
      () => t,
    );
    const firsts = await Promise.all([fleet(), fleet(), fleet()]);
    expect(firsts.map((f) => f.fresh)).toEqual([true, false, false]);
    t = 4999;
    expect((await fleet()).fresh).toBe(false);
    expect(reads).toBe(1);
    t = 5000;
    expect((await fleet()).fresh).toBe(true);
    expect(reads).toBe(2);
  });

  it("a failed read is not cached", async () => {
    let calls = 0;
    const fleet = cachedFleet(
      async () => {
        calls++;
        if (calls === 1) throw new Error("down");
        return { kinds: [], latency: { bounds: [], counts: [], probed: 0 }, lists: 0, readAt: now };
      },
      5000,
      () => 0,
    );
    await expect(fleet()).rejects.toThrow("down");
    expect((await fleet()).fresh).toBe(true);
  });
});

const token = "fleet-page-token-0123456789";
const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;

/** The page as the Node host serves it (`FLEET_PAGE=open`), behind `apiToken` when given. */
function page(
  kube: FakeKube,
  apiToken?: string,
  passes = new PassHistory(),
  access: FleetPageAccess = "open",
) {
  const { ctx } = fakeContext(kube, { now });
  return fleetPage(ctx, sources, passes, { access, ...(apiToken ? { apiToken } : {}) });
}

describe("GET /", () => {
  it("says that kubefn does not reconcile, and why, while its admission policies are missing", async () => {
    const { ctx } = fakeContext(seededKube(1), { now });
    let admission = {
      ready: false,
      problems: ["ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is not installed"],
    };
    const app = fleetPage(ctx, sources, new PassHistory(), { access: "open", admission: () => admission });
    const closed = await (await app.request("/")).text();
    expect(closed).toContain('<span class="c bad">Not reconciling</span>');
    expect(closed).toContain(
      "<li>ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is not installed</li>",
    );
    admission = { ready: true, problems: [] };
    expect(await (await app.request("/")).text()).not.toContain("Not reconciling");
  });

  it.each([
    ["no credentials", undefined, 401],
    ["a wrong bearer token", `Bearer ${token}x`, 401],
    ["a wrong Basic password", basic("admin", "nope"), 401],
    ["the token as the Basic user name", basic(token, ""), 401],
    ["the bearer token", `Bearer ${token}`, 200],
    ["the token as the Basic password", basic("anyone", token), 200],
  ])("with the API token set: %s", async (_, authorization, status) => {
    const kube = seededKube(2);
    const res = await page(kube, token).request("/", authorization ? { headers: { authorization } } : {});
    expect(res.status).toBe(status);
    if (status === 401) {
      expect(res.headers.get("www-authenticate")).toContain("Basic");
      expect(await res.text()).not.toContain("p000");
      // Refused before any read: an unauthenticated flood costs the API server nothing.
      expect(kube.calls).toEqual([]);
    }
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
  });

  it("closed by default (FLEET_PAGE=token, as on Workers and Lambda): without API_TOKEN it is not served, and says how to open it", async () => {
    const kube = seededKube(2);
    const { ctx } = fakeContext(kube, { now });
    for (const app of [
      fleetPage(ctx, sources, new PassHistory()),
      page(kube, undefined, undefined, "token"),
    ]) {
      const res = await app.request("/");
      expect(res.status).toBe(404);
      const text = await res.text();
      expect(text).toContain("the fleet page is closed");
      expect(text).toContain("API_TOKEN");
      expect(text).toContain("FLEET_PAGE=open");
      expect(text).not.toContain("p000");
    }
    // Read nothing: an anonymous flood costs the API server nothing.
    expect(kube.calls).toEqual([]);
    // With the token set, it is served behind it, as with FLEET_PAGE=open.
    const behind = page(kube, token, undefined, "token");
    expect((await behind.request("/")).status).toBe(401);
    expect((await behind.request("/", { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it("FLEET_PAGE=off: never served, not even with the token", async () => {
    const kube = seededKube(2);
    const res = await page(kube, token, undefined, "off").request("/", {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("FLEET_PAGE=off");
    expect(kube.calls).toEqual([]);
  });

  it("a crawler credential scoped to some namespaces gets 403", async () => {
    const scoped = JSON.stringify([
      { name: "ops", token, namespaces: "*" },
      { name: "team-a", token: "team-a-token-0123456789", namespaces: ["crawl"] },
    ]);
    const app = page(seededKube(2), scoped);
    expect(
      (await app.request("/", { headers: { authorization: "Bearer team-a-token-0123456789" } })).status,
    ).toBe(403);
    expect((await app.request("/", { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it("answers with a strict CSP that allows exactly its stylesheet, and no script", async () => {
    const res = await page(seededKube(2)).request("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(fleetCss));
    const hash = btoa(String.fromCharCode(...new Uint8Array(digest)));
    expect(res.headers.get("content-security-policy")).toBe(
      `default-src 'none'; style-src 'sha256-${hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    );
    expect(res.headers.get("x-robots-tag")).toContain("noindex");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const html = await res.text();
    expect(html).toContain(`<style>${fleetCss}</style>`);
    expect(html).not.toMatch(/<script|\son[a-z]+=|javascript:/i);
  });

  it("without a token the page is open but shows no condition message and no address", async () => {
    const kube = seededKube(0);
    kube.seed(proxyResource, {
      ...testProxy({ name: "leaky", phase: "Unhealthy", ip: "198.51.100.77" }),
      status: {
        phase: "Unhealthy",
        ip: "198.51.100.77",
        conditions: [
          cond("Healthy", "False", "ProbeFailed", "2026-11-30T11:00:00Z", "dial 198.51.100.77:8080 refused"),
        ],
      },
    });
    const open = await (await page(kube).request("/")).text();
    expect(open).toContain("leaky");
    expect(open).toContain("ProbeFailed");
    expect(open).not.toContain("198.51.100.77");
    expect(open).toContain("No API token is set");
    const authed = await (
      await page(kube, token).request("/", { headers: { authorization: `Bearer ${token}` } })
    ).text();
    expect(authed).toContain("dial 198.51.100.77:8080 refused");
    expect(authed).not.toContain("No API token is set");
  });

  it("hostile strings from the cluster and from passes render as text, never as markup", async () => {
    const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)><b id='inj'>`;
    const kube = new FakeKube();
    kube.seed(proxyResource, {
      ...testProxy({ name: `p${hostile}`, namespace: `ns${hostile}` }),
      metadata: { namespace: `ns${hostile}`, name: `p${hostile}`, annotations: { note: hostile } },
      status: {
        phase: `Ready${hostile}`,
        conditions: [cond(`T${hostile}`, "False", `R${hostile}`, `2026${hostile}`, `M${hostile}`)],
      },
    });
    kube.seed(subPoolResource, {
      apiVersion: "kubefn.dev/v1",
      kind: "SubPool",
      metadata: { name: `s${hostile}` },
      status: { conditions: [cond("Ready", "False", `R${hostile}`, "2026-11-30T11:00:00Z", `M${hostile}`)] },
    });
    const passes = new PassHistory();
    passes.record(
      {
        ...pass(1),
        key: `proxy/${hostile}`,
        trigger: `drift:${hostile}`,
        result: "error",
        errorClass: "permanent",
        errorReason: hostile,
      },
      now,
    );
    const res = await page(kube, token, passes).request("/", {
      headers: { authorization: `Bearer ${token}` },
    });
    const html = await res.text();
    expect(html).not.toContain("<script>");
    expect(html).not.toContain("<img");
    expect(html).not.toContain("<b id");
    expect(html).toContain("&#60;script&#62;alert(1)&#60;/script&#62;");
    // One page element per kind and row: nothing the cluster wrote opened or closed an element.
    expect(html.match(/<tr>/g)).toHaveLength(6);
  });

  it("a state named __proto__ is counted as a state, not written onto Object.prototype", async () => {
    const kube = new FakeKube();
    for (const name of ["a", "b"])
      kube.seed(proxyResource, { ...testProxy({ name }), status: { phase: "__proto__" } });
    const view = await readFleet(kube, sources, () => now);
    expect(view.kinds[0]!.states).toEqual([{ state: "__proto__", tone: "busy", count: 2 }]);
    expect(({} as Record<string, unknown>).count).toBeUndefined();
  });
});

describe("a fleet's page (issue 35)", () => {
  /** A cluster's group over its own API server (a FakeKube of its own) and its own passes. */
  function groupOf(cluster: string, names: string[]) {
    const kube = new FakeKube();
    for (const name of names) kube.seed(proxyResource, testProxy({ name: `${cluster}-${name}` }));
    const { ctx } = fakeContext(kube, { now });
    const passes = new PassHistory();
    passes.record({ ...pass(1), key: `proxy/crawl/${cluster}-${names[0]}` }, now);
    return { kube, group: fleetGroup({ ...ctx, cluster }, sources, passes) };
  }

  it("has a section per cluster, headed by its name, each with its own objects and passes, in the declared order", async () => {
    const east = groupOf("east", ["a", "b"]);
    const west = groupOf("west", ["c"]);
    const html = await (
      await groupedFleetPage([east.group, west.group], { access: "open" }).request("/")
    ).text();
    const sections = [...html.matchAll(/<section><h2>Cluster (\w+)<\/h2>(.*?)<\/section>/g)];
    expect(sections.map((m) => m[1])).toEqual(["east", "west"]);
    const [eastHtml, westHtml] = sections.map((m) => m[2] ?? "");
    expect(eastHtml).toContain("<h3>Proxy: 2</h3>");
    expect(eastHtml).toContain("crawl/east-a");
    expect(eastHtml).toContain("proxy/crawl/east-a");
    expect(eastHtml).not.toContain("west-");
    expect(westHtml).toContain("<h3>Proxy: 1</h3>");
    expect(westHtml).not.toContain("east-");
    // Each cluster was listed from its own API server, once per kind.
    expect(html).toContain("2 clusters; this view sent 6 list requests to the clusters' API servers");
    expect(east.kube.calls.length).toBe(3);
    expect(west.kube.calls.length).toBe(3);
  });

  it("one cluster's page has no cluster heading (as before fleets)", async () => {
    const html = await (
      await groupedFleetPage([groupOf("east", ["a"]).group], { access: "open" }).request("/")
    ).text();
    expect(html).not.toContain("Cluster east");
    expect(html).toContain("<h2>Proxy: 1</h2>");
  });

  it("a credential scoped to one cluster is refused the page of two (403, before any read)", async () => {
    const scoped = JSON.stringify([
      { name: "ops", token, namespaces: "*" },
      { name: "east-ops", token: "east-ops-token-0123456789", namespaces: "*", clusters: ["east"] },
    ]);
    const east = groupOf("east", ["a"]);
    const west = groupOf("west", ["c"]);
    const app = groupedFleetPage([east.group, west.group], { apiToken: scoped });
    const refused = await app.request("/", {
      headers: { authorization: "Bearer east-ops-token-0123456789" },
    });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("not west");
    expect([...east.kube.calls, ...west.kube.calls]).toEqual([]);
    expect((await app.request("/", { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // Its own cluster's page it may see.
    const own = groupedFleetPage([east.group], { apiToken: scoped });
    expect(
      (await own.request("/", { headers: { authorization: "Bearer east-ops-token-0123456789" } })).status,
    ).toBe(200);
  });

  it("a hostile cluster name could not be declared, but would still render as text", async () => {
    const hostile = groupOf("<b>x</b>", ["a"]);
    const html = await (
      await groupedFleetPage([hostile.group, groupOf("west", ["c"]).group], { access: "open" }).request("/")
    ).text();
    expect(html).not.toContain("<b>x</b>");
    expect(html).toContain("Cluster &#60;b&#62;x&#60;/b&#62;");
  });
});
