/**
 * The status seal (shared/runtime/core/status-seal.ts) and where it is checked: intake's mapping of a
 * primary's status write, the pass (rewrite, Warning Event, log line) and the sweep. Issue 20: a
 * status written with kubefn's own token outside kubefn must bring a pass, for Proxies, SubPools
 * and Sites, while kubefn's own status writes bring none.
 */
import { describe, expect, it } from "vitest";
import type { Kube, KubeObject, ListOptions, ListPage } from "../../../shared/kube/port.ts";
import { Resources } from "../../../shared/kube/resources.ts";
import { createStatusSeal } from "../../../shared/runtime/core/index.ts";
import {
  canonicalJson,
  createRegistry,
  done,
  mapEvents,
  runPass,
  runSweep,
  statusSealFrom,
} from "../../../shared/runtime/index.ts";
import { FOREIGN_STATUS_REASON } from "../../../shared/runtime/pass/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";
import {
  ProxyResource,
  proxyController,
  SiteResource,
  SubPoolResource,
  siteController,
  subPoolController,
} from "./controllers.ts";

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const seal = createStatusSeal("seal-key-0123456789abcdef");

const proxy = (status?: Record<string, unknown>): KubeObject => ({
  apiVersion: "crawl.example.com/v1alpha1",
  kind: "Proxy",
  metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1, resourceVersion: "7" },
  spec: { mode: "External" },
  ...(status ? { status } : {}),
});
const sealed = async (object: KubeObject): Promise<KubeObject> => {
  const status = { ...(object.status as Record<string, unknown>) };
  status.seal = await seal.seal(object, status);
  return { ...object, status };
};
const kubefnsStatus = { observedGeneration: 1, phase: "Unhealthy", ip: "10.0.0.1" };

describe("the seal", () => {
  it("verifies kubefn's own status, whatever the key order, and leaves the probe bookkeeping out", async () => {
    const object = await sealed(proxy(kubefnsStatus));
    expect(await seal.verify(object)).toBe("sealed");
    const reordered = {
      ...object,
      status: {
        ip: "10.0.0.1",
        seal: (object.status as { seal: string }).seal,
        phase: "Unhealthy",
        observedGeneration: 1,
      },
    };
    expect(await seal.verify(reordered)).toBe("sealed");
    const probed = {
      ...object,
      status: {
        ...(object.status as object),
        health: "{}",
        latencyMillis: 12,
        lastHealthCheckTime: "2026-11-30T12:00:00Z",
      },
    };
    expect(await seal.verify(probed)).toBe("sealed");
    expect(canonicalJson({ b: 1, a: [{ d: null, c: "x" }], e: undefined })).toBe('{"a":[{"c":"x"}],"b":1}');
  });

  it.each([
    ["an ip of someone's choosing", { ip: "203.0.113.66" }],
    ["phase Ready", { phase: "Ready" }],
    ["a condition", { conditions: [{ type: "Ready", status: "True" }] }],
    ["a seal of another key", { seal: "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }],
    ["a malformed seal", { seal: "anything" }],
  ])("is foreign with %s", async (_, change) => {
    const object = await sealed(proxy(kubefnsStatus));
    const forged = { ...object, status: { ...(object.status as object), ...change } };
    expect(await seal.verify(forged)).toBe("foreign");
  });

  it("is foreign on another object (a seal is bound to its UID), unsealed without one, sealed with no status", async () => {
    const object = await sealed(proxy(kubefnsStatus));
    expect(await seal.verify({ ...object, metadata: { ...object.metadata, uid: "uid-p2" } })).toBe("foreign");
    expect(await seal.verify(proxy(kubefnsStatus))).toBe("unsealed");
    expect(await seal.verify(proxy())).toBe("sealed");
  });

  it("is keyed by STATUS_SEAL_KEY, else by a key derived from the audit token or relay secret, else off", async () => {
    const object = proxy(kubefnsStatus);
    const derived = statusSealFrom({ auditToken: "audit-token-0123456789" })!;
    const status = { ...kubefnsStatus, seal: await derived.seal(object, kubefnsStatus) };
    expect(await derived.verify({ ...object, status })).toBe("sealed");
    // The derived key is not the audit token itself.
    expect(await createStatusSeal("audit-token-0123456789").verify({ ...object, status })).toBe("foreign");
    expect(statusSealFrom({})).toBeUndefined();
  });

  it("with STATUS_SEAL_KEY, a rotated audit token or relay secret leaves every seal valid; derived from them, it does not", async () => {
    const object = proxy(kubefnsStatus);
    const before = { statusSealKey: "seal-key-0123456789abcdef", auditToken: "audit-token-0123456789" };
    const sealed = { ...kubefnsStatus, seal: await statusSealFrom(before)!.seal(object, kubefnsStatus) };
    const rotated = {
      ...before,
      auditToken: "audit-token-rotated-9876543210",
      relaySecret: "relay-secret-0123456789",
    };
    expect(await statusSealFrom(rotated)!.verify({ ...object, status: sealed })).toBe("sealed");
    const derived = {
      ...kubefnsStatus,
      seal: await statusSealFrom({ auditToken: before.auditToken })!.seal(object, kubefnsStatus),
    };
    expect(
      await statusSealFrom({ auditToken: rotated.auditToken })!.verify({ ...object, status: derived }),
    ).toBe("foreign");
  });
});

/** An audit event of a status write to `resource` (`group`/`plural`), with its stored object. */
function statusWrite(
  group: string,
  plural: string,
  object: KubeObject,
  opts: { user?: string; level?: "Metadata" | "RequestResponse" } = {},
) {
  const level = opts.level ?? "RequestResponse";
  return {
    level,
    auditID: `id-${object.metadata.name}`,
    stage: "ResponseComplete",
    verb: "patch",
    user: { username: opts.user ?? SELF },
    objectRef: {
      apiGroup: group,
      apiVersion: "v1alpha1",
      resource: plural,
      subresource: "status",
      ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
      name: object.metadata.name,
    },
    responseStatus: { code: 200 },
    ...(level === "RequestResponse" ? { responseObject: object } : {}),
    stageTimestamp: "2026-11-30T12:00:00.000000Z",
  };
}
const eventList = (...items: unknown[]) => ({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items });

describe("intake: a primary's status write", () => {
  const registry = createRegistry([proxyController(), subPoolController(), siteController()]);
  const { ctx } = fakeContext(new FakeKube());
  const pool = (status: Record<string, unknown>): KubeObject => ({
    apiVersion: "subrelay.example.com/v1alpha1",
    kind: "SubPool",
    metadata: { name: "pool1", uid: "uid-pool1" },
    status,
  });
  const site = (status: Record<string, unknown>): KubeObject => ({
    apiVersion: "unbounded-cloud.io/v1alpha3",
    kind: "Site",
    metadata: { name: "dc1", uid: "uid-dc1" },
    status,
  });
  const cases: Array<[string, string, string, KubeObject, Record<string, unknown>]> = [
    [
      "Proxy",
      ProxyResource.group,
      ProxyResource.resource,
      proxy(kubefnsStatus),
      { controller: "proxy", namespace: "ns1", name: "p1" },
    ],
    [
      "SubPool",
      SubPoolResource.group,
      SubPoolResource.resource,
      pool({ hostname: "pool1.example" }),
      { controller: "subpool", name: "pool1" },
    ],
    [
      "Site",
      SiteResource.group,
      SiteResource.resource,
      site({ observedGeneration: 1 }),
      { controller: "site", name: "dc1" },
    ],
  ];

  it.each(cases)(
    "by kubefn's identity, without kubefn's seal, sends the %s a pass",
    async (_, group, plural, object, request) => {
      const forged = { ...object, status: { ...(object.status as object), seal: "v1.forged" } };
      const mapped = await mapEvents(ctx, registry, eventList(statusWrite(group, plural, forged)), {
        selfUsernames: [SELF],
        seal,
      });
      expect(mapped.requests).toEqual([request]);
      expect(mapped.counts).toMatchObject({ events: 1, mapped: 1, dropped: 0 });
      // Removing the seal is no way round it.
      const unsealed = await mapEvents(ctx, registry, eventList(statusWrite(group, plural, object)), {
        selfUsernames: [SELF],
        seal,
      });
      expect(unsealed.requests).toEqual([request]);
    },
  );

  it.each(cases)(
    "kubefn's own sealed status write of a %s is dropped: no pass",
    async (_, group, plural, object) => {
      const mapped = await mapEvents(
        ctx,
        registry,
        eventList(statusWrite(group, plural, await sealed(object))),
        {
          selfUsernames: [SELF],
          seal,
        },
      );
      expect(mapped.requests).toEqual([]);
      expect(mapped.counts).toMatchObject({ events: 1, dropped: 1, mapped: 0 });
    },
  );

  it.each(cases)(
    "a status write that blanks a %s's status (kubefn never writes an empty one) sends it a pass",
    async (_, group, plural, object, request) => {
      const blanked = { ...object, status: {} };
      const mapped = await mapEvents(ctx, registry, eventList(statusWrite(group, plural, blanked)), {
        selfUsernames: [SELF],
        seal,
      });
      expect(mapped.requests).toEqual([request]);
      expect(mapped.counts).toMatchObject({ events: 1, mapped: 1, dropped: 0 });
    },
  );

  it("judges the last write of a batch, and drops what it cannot judge (Metadata level) or without a seal key", async () => {
    const forged = { ...proxy(kubefnsStatus), status: { ip: "203.0.113.66" } };
    const kubefns = await sealed(proxy(kubefnsStatus));
    const g = ProxyResource.group;
    const p = ProxyResource.resource;
    const healed = await mapEvents(
      ctx,
      registry,
      eventList(statusWrite(g, p, forged), statusWrite(g, p, kubefns)),
      {
        selfUsernames: [SELF],
        seal,
      },
    );
    expect(healed.requests).toEqual([]);
    expect(healed.counts).toMatchObject({ events: 2, dropped: 2 });
    const metadata = await mapEvents(
      ctx,
      registry,
      eventList(statusWrite(g, p, forged, { level: "Metadata" })),
      {
        selfUsernames: [SELF],
        seal,
      },
    );
    expect(metadata.requests).toEqual([]);
    const off = await mapEvents(ctx, registry, eventList(statusWrite(g, p, forged)), {
      selfUsernames: [SELF],
    });
    expect(off.requests).toEqual([]);
    expect(off.counts.dropped).toBe(1);
  });
});

describe("the pass", () => {
  const message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };
  const recompute = async (_: unknown, p: KubeObject) => {
    p.status = { ...(p.status as object), phase: "Unhealthy", ip: "10.0.0.1" };
    return done();
  };

  it("rewrites a status kubefn did not seal, sealed, with a Warning Event and a log line naming the write", async () => {
    const kube = new FakeKube();
    const forged = await sealed(proxy(kubefnsStatus));
    (forged.status as Record<string, unknown>).ip = "203.0.113.66";
    (forged.status as Record<string, unknown>).phase = "Ready";
    kube.seed(ProxyResource, forged);
    const { ctx, recorded } = fakeContext(kube);
    const registry = createRegistry([proxyController({ reconcile: recompute })]);
    const result = await runPass({ ...ctx, seal }, registry, message);
    expect(result.wroteStatus).toBe(true);
    const stored = kube.stored(ProxyResource, { namespace: "ns1", name: "p1" })!;
    expect(stored.status).toMatchObject({ ip: "10.0.0.1", phase: "Unhealthy" });
    expect(await seal.verify(stored)).toBe("sealed");
    expect(recorded.logs).toContainEqual(
      expect.objectContaining({
        level: "warn",
        msg: expect.stringMatching(/^status not written by kubefn/),
        fields: expect.objectContaining({ key: "proxy/ns1/p1" }),
      }),
    );
    expect(recorded.counts).toContainEqual({
      name: "kubefn_foreign_status_total",
      labels: { controller: "proxy" },
    });
    const events = await kube.list<KubeObject & { reason?: string; type?: string; note?: string }>(
      Resources.Event,
      { namespace: "ns1" },
    );
    const warning = events.items.find((e) => e.reason === FOREIGN_STATUS_REASON);
    expect(warning).toMatchObject({ type: "Warning" });
    expect(warning?.note).toMatch(/not written by kubefn/);
  });

  it("writes nothing over kubefn's own sealed status when nothing changed, and seals an unsealed one quietly", async () => {
    const kube = new FakeKube();
    kube.seed(ProxyResource, await sealed(proxy(kubefnsStatus)));
    const { ctx, recorded } = fakeContext(kube);
    const registry = createRegistry([proxyController({ reconcile: recompute })]);
    expect((await runPass({ ...ctx, seal }, registry, message)).wroteStatus).toBe(false);
    expect(kube.writes()).toBe(0);

    const old = new FakeKube();
    old.seed(ProxyResource, proxy(kubefnsStatus));
    const before = fakeContext(old);
    expect((await runPass({ ...before.ctx, seal }, registry, message)).wroteStatus).toBe(true);
    expect(await seal.verify(old.stored(ProxyResource, { namespace: "ns1", name: "p1" })!)).toBe("sealed");
    expect(before.recorded.logs.filter((l) => l.level === "warn")).toEqual([]);
    expect(recorded.logs.filter((l) => l.level === "warn")).toEqual([]);
  });
});

describe("the latch", () => {
  const poolMessage = { request: { controller: "subpool", name: "pool1" }, attempt: 0 };
  const latched = {
    observedGeneration: 1,
    conditions: [
      { type: "InvalidSpec", status: "True", reason: "Invalid", message: "", observedGeneration: 1 },
    ],
  };
  const pool = (status: Record<string, unknown>): KubeObject => ({
    apiVersion: "subrelay.example.com/v1alpha1",
    kind: "SubPool",
    metadata: { name: "pool1", uid: "uid-pool1", generation: 1, resourceVersion: "3" },
    status,
  });

  it("holds only on a sealed status: a forged latch (which would freeze the object) or an unsealed one runs the controller", async () => {
    for (const [status, runs] of [
      [{ ...latched, seal: "v1.forged" }, true],
      [latched, true],
      [(await sealed(pool(latched))).status as Record<string, unknown>, false],
    ] as const) {
      const kube = new FakeKube();
      kube.seed(SubPoolResource, pool(status));
      const { ctx } = fakeContext(kube);
      let ran = false;
      const registry = createRegistry([
        subPoolController({
          reconcile: async () => {
            ran = true;
            return done();
          },
        }),
      ]);
      const result = await runPass({ ...ctx, seal }, registry, poolMessage);
      expect([ran, result.result === "latched"]).toEqual([runs, !runs]);
    }
  });
});

describe("the sweep", () => {
  function listing(objects: KubeObject[]): Kube {
    return {
      async list<T extends KubeObject>(
        res: { resource: string },
        _opts: ListOptions = {},
      ): Promise<ListPage<T>> {
        return {
          items: (res.resource === ProxyResource.resource ? objects : []) as T[],
          resourceVersion: "9",
        };
      },
    } as unknown as Kube;
  }

  it("sends a pass to a listed primary whose status kubefn did not seal, and none to kubefn's own", async () => {
    const mine = await sealed(proxy(kubefnsStatus));
    const theirs = { ...mine, metadata: { ...mine.metadata, name: "p2", uid: "uid-p2" } };
    const { ctx, recorded } = fakeContext(listing([mine, theirs]), { now: new Date("2026-11-30T12:00:30Z") });
    // A day between drift passes and safety nets: only the seal can name p2 now.
    const registry = createRegistry([proxyController({ resyncSeconds: 86_400 })]);
    const summary = await runSweep({ ...ctx, seal }, registry, [], {
      shardSize: 100,
      attachListed: false,
      safetyNetSeconds: 10 * 365 * 86_400,
    });
    const sent = recorded.sent.flatMap((s) => s.messages);
    expect(sent.map((m) => m.request.name)).toEqual(["p2"]);
    expect(sent[0]?.trigger).toEqual({ kind: "drift", reason: "foreign-status" });
    expect(summary.controllers.proxy?.reasons).toEqual({ "drift:foreign-status": 1 });
  });

  it("a status blanked long after the object was created is reported and sent a pass; a new object's is not", async () => {
    const now = new Date("2026-11-30T12:00:30Z");
    const blanked = {
      ...proxy(),
      metadata: {
        ...proxy().metadata,
        name: "blanked",
        uid: "uid-blanked",
        creationTimestamp: "2026-11-30T11:00:00Z",
      },
      status: {},
    };
    const fresh = {
      ...proxy(),
      metadata: {
        ...proxy().metadata,
        name: "fresh",
        uid: "uid-fresh",
        creationTimestamp: "2026-11-30T12:00:20Z",
      },
    };
    const { ctx, recorded } = fakeContext(listing([blanked, fresh]), { now });
    const registry = createRegistry([proxyController({ resyncSeconds: 86_400 })]);
    await runSweep({ ...ctx, seal }, registry, [], {
      shardSize: 100,
      attachListed: false,
      safetyNetSeconds: 10 * 365 * 86_400,
    });
    const sent = recorded.sent.flatMap((s) => s.messages);
    expect(sent.map((m) => [m.request.name, m.trigger])).toEqual([
      ["blanked", { kind: "drift", reason: "empty-status" }],
    ]);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_empty_status_total",
      labels: { controller: "proxy" },
    });
    expect(recorded.logs.some((l) => l.level === "warn" && l.msg.startsWith("status is empty"))).toBe(true);
  });
});
