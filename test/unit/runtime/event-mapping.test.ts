import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Resources } from "../../../shared/kube/resources.ts";
import type { Resource } from "../../../shared/runtime/core/index.ts";
import { createRegistry, EventBatchError, mapEvents } from "../../../shared/runtime/index.ts";
import { relayBatchSchema } from "../../../shared/runtime/intake/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";
import {
  ProxyResource,
  proxyController,
  SINGLETON,
  SiteResource,
  siteController,
  subPoolController,
} from "./controllers.ts";

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const fixture = JSON.parse(
  readFileSync(new URL("../../fixtures/audit/mixed.json", import.meta.url), "utf8"),
) as {
  kind: string;
  apiVersion: string;
  items: unknown[];
};
const byId = (auditID: string) =>
  fixture.items.find(
    (item) => (item as { auditID?: string }).auditID === `a0000001-0000-4000-8000-0000000000${auditID}`,
  );
const eventList = (...items: unknown[]) => ({
  kind: "EventList",
  apiVersion: "audit.k8s.io/v1",
  metadata: {},
  items,
});

function world() {
  const kube = new FakeKube();
  const proxy = (name: string, secret: string) => ({
    apiVersion: "crawl.example.com/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace: "ns1", uid: `uid-${name}` },
    spec: { mode: "Managed", cloudInit: { secretRef: { name: secret } } },
  });
  kube.seed(ProxyResource, proxy("p1", "cloud-init"));
  kube.seed(ProxyResource, proxy("p2", "other"));
  for (const name of ["dc1", "dc2"])
    kube.seed(SiteResource, { apiVersion: "unbounded-cloud.io/v1alpha3", kind: "Site", metadata: { name } });
  const { ctx, recorded } = fakeContext(kube);
  const registry = createRegistry([proxyController(), subPoolController(), siteController()]);
  return { kube, ctx, recorded, registry };
}

describe("mapEvents: names no stored object can have", () => {
  // The API server refuses these names, so only a forged or corrupted event carries one; each
  // would cost a pass (and "." or ".." would address another path once a URL resolves them).
  const auditWrite = (namespace: string, name: string) => ({
    level: "Metadata",
    auditID: `id-${namespace}-${name.slice(0, 8)}`,
    stage: "ResponseComplete",
    requestURI: "/apis/crawl.example.com/v1alpha1/namespaces/x/proxies/y",
    verb: "update",
    user: { username: "tenant" },
    objectRef: {
      resource: "proxies",
      apiGroup: "crawl.example.com",
      apiVersion: "v1alpha1",
      namespace,
      name,
    },
    responseStatus: { code: 200 },
    requestReceivedTimestamp: "2026-11-30T12:00:00Z",
    stageTimestamp: "2026-11-30T12:00:00Z",
  });
  const bad: Array<[string, string]> = [
    ["ns1", ".."],
    ["ns1", "."],
    ["..", "p1"],
    ["ns1", "a/b"],
    ["ns1", "a%2e"],
    ["ns1", "a".repeat(254)],
    ["Not_A_Label", "p1"],
    ["n".repeat(64), "p1"],
  ];

  it.each(bad)("audit %s/%s is skipped and counted, never a request", async (namespace, name) => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, eventList(auditWrite(namespace, name)), {
      selfUsernames: [SELF],
    });
    expect(result.requests).toEqual([]);
    expect(result.counts).toMatchObject({ events: 1, skipped: 1 });
  });

  it.each(bad)("relay %s/%s is skipped and counted, never a request", async (namespace, name) => {
    const { ctx, registry } = world();
    const batch = {
      kind: "RelayBatch",
      apiVersion: "kubefn.dev/v1",
      events: [
        {
          type: "MODIFIED",
          resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
          object: { metadata: { namespace, name, uid: "u1", generation: 2 } },
        },
      ],
    };
    const result = await mapEvents(ctx, registry, batch, { selfUsernames: [SELF] });
    expect(result.requests).toEqual([]);
    expect(result.counts).toMatchObject({ events: 1, skipped: 1 });
  });

  it("a well-formed name at the limits still maps", async () => {
    const { ctx, registry } = world();
    const name = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`;
    const result = await mapEvents(ctx, registry, eventList(auditWrite("n".repeat(63), name)), {
      selfUsernames: [SELF],
    });
    expect(result.requests).toEqual([{ controller: "proxy", namespace: "n".repeat(63), name }]);
  });
});

describe("mapEvents: audit EventList", () => {
  it("maps the mixed fixture to deduplicated requests and accounts for every event", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, fixture, { selfUsernames: [SELF] });
    expect(result.source).toBe("audit");
    expect(result.requests).toEqual([
      { controller: "proxy", namespace: "ns1", name: "p1" },
      { controller: "subpool", name: "demo-pool" },
      { controller: "site", name: "dc1" },
    ]);
    expect(result.counts).toEqual({
      events: 16,
      skipped: 2,
      dropped: 7,
      ignored: 2,
      unresolved: 0,
      mapped: 5,
      mapperErrors: 0,
      requests: 3,
    });
    const c = result.counts;
    expect(c.skipped + c.dropped + c.ignored + c.unresolved + c.mapped).toBe(c.events);
  });

  it.each([
    ["01", "a Proxy create", [{ controller: "proxy", namespace: "ns1", name: "p1" }], "mapped"],
    ["02", "a status-subresource write", [], "dropped"],
    ["03", "a write by the functions' own identity", [], "dropped"],
    ["04", "a failed write (409)", [], "dropped"],
    ["05", "a get", [], "dropped"],
    ["06", "the RequestReceived stage", [], "dropped"],
    // Regression: this said "mapped" while audit-fixtures.test.ts said the same event maps to
    // nothing; both passed, because this registry's proxy owned Pods and the real one does not.
    ["07", "a Pod with a controller ref to a Proxy (the proxy owns no Pods)", [], "ignored"],
    [
      "08",
      "a Secret at Metadata level (watched by proxy)",
      [{ controller: "proxy", namespace: "ns1", name: "p1" }],
      "mapped",
    ],
    ["09", "a self-created Namespace", [], "dropped"],
    [
      "10",
      "a Namespace owned by the cluster-scoped SubPool",
      [{ controller: "subpool", name: "demo-pool" }],
      "mapped",
    ],
    ["12", "an event without responseStatus", [], "skipped"],
    ["13", "a kind nobody registered (Lease)", [], "ignored"],
    ["15", "a per-site ConfigMap (watch mapper)", [{ controller: "site", name: "dc1" }], "mapped"],
    ["16", "a namespaces/finalize subresource write", [], "dropped"],
  ] as const)("item %s: %s", async (id, _name, requests, bucket) => {
    const { ctx, registry } = world();
    const item = byId(id);
    expect(item).toBeDefined();
    const result = await mapEvents(ctx, registry, eventList(item), { selfUsernames: [SELF] });
    expect(result.requests).toEqual(requests);
    expect(result.counts[bucket]).toBe(1);
  });

  it("skips a malformed item and goes on", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, eventList("not an event", null, 42, byId("01")));
    expect(result.counts).toMatchObject({ events: 4, skipped: 3, mapped: 1, requests: 1 });
  });

  it("keeps self-writes when no self identity is configured", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, eventList(byId("03")));
    expect(result.requests).toEqual([{ controller: "proxy", namespace: "ns1", name: "p1" }]);
  });

  const metadataSecret = (namespace: string, name: string) => ({
    level: "Metadata",
    auditID: "b0000000-0000-4000-8000-000000000001",
    stage: "ResponseComplete",
    requestURI: `/api/v1/namespaces/${namespace}/secrets/${name}`,
    verb: "delete",
    user: { username: "jane@example.com", groups: ["system:authenticated"] },
    objectRef: { resource: "secrets", namespace, name, apiVersion: "v1" },
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: "2026-11-30T12:00:00.000000Z",
    stageTimestamp: "2026-11-30T12:00:00.002000Z",
  });

  it("maps an owned kind without a body through ownerFromKey", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(
      ctx,
      registry,
      eventList(metadataSecret("subpool-demo-pool", "credentials")),
    );
    expect(result.requests).toEqual([{ controller: "subpool", name: "demo-pool" }]);
  });

  it("leaves an owned kind without a body and without ownerFromKey to the sweep", async () => {
    const { ctx } = world();
    const registry = createRegistry([subPoolController({ ownerFromKey: undefined })]);
    const result = await mapEvents(
      ctx,
      registry,
      eventList(metadataSecret("subpool-demo-pool", "credentials")),
    );
    expect(result.requests).toEqual([]);
    expect(result.counts).toMatchObject({ unresolved: 1, mapped: 0 });
  });

  it("ignores an owned kind whose controller is not a registered primary", async () => {
    const { ctx, registry } = world();
    const pod = structuredClone(byId("07")) as {
      responseObject: { metadata: { ownerReferences: { kind: string; apiVersion: string }[] } };
    };
    pod.responseObject.metadata.ownerReferences[0]!.kind = "ReplicaSet";
    pod.responseObject.metadata.ownerReferences[0]!.apiVersion = "apps/v1";
    const result = await mapEvents(ctx, registry, eventList(pod));
    expect(result.requests).toEqual([]);
    expect(result.counts.ignored).toBe(1);
  });

  const configMapEvent = (name: string) => ({
    ...(byId("15") as object),
    objectRef: { resource: "configmaps", namespace: "unbounded-kube", name, apiVersion: "v1" },
  });

  it("fans a shared config out to the singleton request and every Site", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, eventList(configMapEvent("unbounded-config")));
    expect(result.requests).toEqual([
      { controller: "site", name: SINGLETON },
      { controller: "site", name: "dc1" },
      { controller: "site", name: "dc2" },
    ]);
  });

  it("counts a failing mapper and keeps the rest of the batch", async () => {
    const { ctx, registry, recorded } = world();
    const result = await mapEvents(
      ctx,
      registry,
      eventList(configMapEvent("boom"), configMapEvent("site-config-dc2")),
    );
    expect(result.requests).toEqual([{ controller: "site", name: "dc2" }]);
    expect(result.counts.mapperErrors).toBe(1);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_mapper_errors_total",
      labels: { controller: "site", kind: "ConfigMap" },
    });
    expect(recorded.logs.some((l) => l.level === "error" && l.msg === "watch mapper failed")).toBe(true);
  });

  it("calls a mapper once per object even when the batch changed it many times", async () => {
    const { ctx, registry, kube } = world();
    const secret = byId("08");
    await mapEvents(ctx, registry, eventList(secret, secret, secret));
    expect(kube.calls.filter((c) => c.method === "list")).toHaveLength(1);
  });

  it("runs at most mapperConcurrency mappers at once", async () => {
    const { ctx } = world();
    let running = 0;
    let peak = 0;
    const registry = createRegistry([
      siteController({
        watches: [
          {
            resource: {
              group: "",
              version: "v1",
              resource: "configmaps",
              kind: "ConfigMap",
              namespaced: true,
            },
            async map(_ctx, change) {
              running++;
              peak = Math.max(peak, running);
              await new Promise((resolve) => setTimeout(resolve, 2));
              running--;
              return [{ controller: "site", name: change.key.name }];
            },
          },
        ],
      }),
    ]);
    const events = Array.from({ length: 20 }, (_, i) => configMapEvent(`cm-${i}`));
    const result = await mapEvents(ctx, registry, eventList(...events), { mapperConcurrency: 3 });
    expect(result.requests).toHaveLength(20);
    expect(peak).toBe(3);
  });

  it("expands a deletecollection by the items of its response", async () => {
    const { ctx } = world();
    // A registry whose proxy owns Pods, so the Pods' controller references map back to it.
    const registry = createRegistry([proxyController({ owns: [Resources.Pod as Resource] })]);
    const pod = byId("07") as { responseObject: unknown };
    const collection = {
      ...(byId("07") as object),
      verb: "deletecollection",
      objectRef: { resource: "pods", namespace: "ns1", apiVersion: "v1" },
      responseObject: { kind: "PodList", apiVersion: "v1", metadata: {}, items: [pod.responseObject] },
    };
    const result = await mapEvents(ctx, registry, eventList(collection));
    expect(result.requests).toEqual([{ controller: "proxy", namespace: "ns1", name: "p1" }]);
  });

  it("a primary's stored object from its audit event maps to its key only: the body is the sender's word", async () => {
    const { ctx, registry } = world();
    const stored = {
      apiVersion: "subrelay.example.com/v1alpha1",
      kind: "SubPool",
      metadata: { name: "demo", uid: "uid-demo", resourceVersion: "41", generation: 1 },
      spec: { cpa: { image: "attacker.example/cpa:evil" } },
    };
    const created = {
      kind: "Event",
      level: "RequestResponse",
      stage: "ResponseComplete",
      verb: "create",
      user: { username: "alice" },
      objectRef: { apiGroup: "subrelay.example.com", resource: "subpools", name: "demo" },
      responseStatus: { code: 201 },
      responseObject: stored,
      stageTimestamp: "2026-11-30T12:00:00.004211Z",
    };
    const result = await mapEvents(ctx, registry, eventList(created));
    expect(result.requests).toEqual([{ controller: "subpool", name: "demo" }]);
    // Reasons are intake's own words (which kind of change it saw), keyed by request, never a body;
    // of the body only a creation's UID travels, as the precondition of the pass's first write
    // (issue 33: the finalizer patch tests it), never as a fact the pass acts on.
    expect(Object.keys(result).sort()).toEqual([
      "canaries",
      "counts",
      "reasons",
      "requests",
      "source",
      "uids",
    ]);
    expect([...result.reasons]).toEqual([["subpool//demo", "created"]]);
    expect([...result.uids]).toEqual([["subpool//demo", "uid-demo"]]);
  });

  it.each([
    [{ kind: "EventList", apiVersion: "audit.k8s.io/v1" }, /malformed audit EventList/],
    [{ kind: "EventList", apiVersion: "audit.k8s.io/v1beta1", items: [] }, /malformed audit EventList/],
    [{ kind: "Pod" }, /expected kind EventList/],
    ["text", /expected kind EventList/],
    [{ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events: {} }, /malformed RelayBatch/],
  ])("rejects the envelope %j", async (body, message) => {
    const { ctx, registry } = world();
    await expect(mapEvents(ctx, registry, body)).rejects.toThrow(EventBatchError);
    await expect(mapEvents(ctx, registry, body)).rejects.toThrow(message);
  });
});

describe("mapEvents: relay batch", () => {
  const batch = {
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: [
      {
        type: "ADDED",
        resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
        object: { metadata: { name: "p2", namespace: "ns1", uid: "uid-p2" } },
      },
      {
        type: "MODIFIED",
        resource: { group: "apps", version: "v1", resource: "statefulsets" },
        object: {
          metadata: {
            name: "cpa",
            namespace: "subpool-demo-pool",
            uid: "uid-sts",
            ownerReferences: [
              {
                apiVersion: "subrelay.example.com/v1alpha1",
                kind: "SubPool",
                name: "demo-pool",
                uid: "u",
                controller: true,
              },
            ],
          },
        },
      },
      {
        type: "DELETED",
        resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
        object: { metadata: { name: "p2", namespace: "ns1", uid: "uid-p2" } },
      },
      {
        type: "BOOKMARK",
        resource: { group: "", version: "v1", resource: "pods" },
        object: { metadata: { name: "x" } },
      },
      {
        type: "ADDED",
        resource: { group: "", version: "v1", resource: "nodes" },
        object: { metadata: { name: "n1" } },
      },
    ],
  };

  it("maps primaries and owned kinds, deduplicates, skips malformed and ignores unknown kinds", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, batch);
    expect(result.source).toBe("relay");
    expect(result.requests).toEqual([
      { controller: "proxy", namespace: "ns1", name: "p2" },
      { controller: "subpool", name: "demo-pool" },
    ]);
    expect(result.counts).toMatchObject({ events: 5, mapped: 3, skipped: 1, ignored: 1, requests: 2 });
  });

  it("the exported schema accepts a well-formed batch", () => {
    const valid = { ...batch, events: batch.events.slice(0, 3) };
    expect(relayBatchSchema.safeParse(valid).success).toBe(true);
    expect(relayBatchSchema.safeParse(batch).success).toBe(false);
  });
});

describe("regression (issue 33): a primary's creation alone", () => {
  const create = (name: string, uid: string | undefined, verb = "create") => ({
    level: "RequestResponse",
    auditID: `b0000000-0000-4000-8000-${name.padEnd(12, "0").slice(0, 12)}`,
    stage: "ResponseComplete",
    requestURI: "/apis/subrelay.example.com/v1alpha1/subpools",
    verb,
    user: { username: "admin", groups: ["system:masters"] },
    objectRef: { resource: "subpools", name, apiGroup: "subrelay.example.com", apiVersion: "v1alpha1" },
    responseStatus: { metadata: {}, code: verb === "create" ? 201 : 200 },
    responseObject: {
      apiVersion: "subrelay.example.com/v1alpha1",
      kind: "SubPool",
      metadata: { name, generation: 1, ...(uid ? { uid } : {}) },
      spec: {},
    },
  });

  it("maps with the reason `created` and the UID its body names, so the pass may add the finalizer unread", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(ctx, registry, eventList(create("a", "uid-a"), create("b", undefined)), {
      selfUsernames: [SELF],
    });
    expect(result.requests).toEqual([
      { controller: "subpool", name: "a" },
      { controller: "subpool", name: "b" },
    ]);
    expect([...result.reasons]).toEqual([["subpool//a", "created"]]);
    expect([...result.uids]).toEqual([["subpool//a", "uid-a"]]);
  });

  it("with another change of the key in the batch, the pass is a whole one and carries no UID", async () => {
    const { ctx, registry } = world();
    const result = await mapEvents(
      ctx,
      registry,
      eventList(create("a", "uid-a"), create("a", "uid-a", "update")),
      {
        selfUsernames: [SELF],
      },
    );
    expect(result.requests).toEqual([{ controller: "subpool", name: "a" }]);
    expect([...result.reasons]).toEqual([]);
    expect([...result.uids]).toEqual([]);
  });
});
