import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { poolUid, subPoolObject } from "../../../test/support/subpools.ts";
import type { Condition } from "../../kube/conditions.ts";
import { NotFoundError } from "../../kube/errors.ts";
import type { KubeObject, Resource } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { createRegistry, createSweepMemo, type PassMessage, runPass } from "../../runtime/index.ts";
import { subPoolFinalizer, subPoolManagedLabel, subPoolPoolLabel, subPoolResource } from "./api.ts";
import { parseOperatorConfig } from "./config.ts";
import { subPoolController } from "./controller.ts";
import { endpointSliceResource, httpRouteResource } from "./desired.ts";

const ns = "subpool-demo";
const message: PassMessage = { request: { controller: "subpool", name: "demo" }, attempt: 0 };
const registry = createRegistry([subPoolController({ randomBytes: (n) => new Uint8Array(n).fill(7) })]);
const ownedKinds: [Resource, string][] = [
  [Resources.Secret, "demo-credentials"],
  [Resources.ServiceAccount, "demo"],
  [Resources.ConfigMap, "demo-config"],
  [Resources.ResourceQuota, "demo-quota"],
  [Resources.NetworkPolicy, "demo"],
  [Resources.Service, "demo-cpa"],
  [Resources.StatefulSet, "demo-cpa-manager"],
  [Resources.PodDisruptionBudget, "demo"],
];

let kube: FakeKube;
let ctx: ReturnType<typeof fakeContext>["ctx"];
let recorded: ReturnType<typeof fakeContext>["recorded"];

beforeEach(() => {
  kube = new FakeKube();
  ({ ctx, recorded } = fakeContext(kube));
});

const pass = () => runPass(ctx, registry, message);
const pool = () => kube.stored(subPoolResource, { name: "demo" })!;
const conditions = () => (pool().status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
const condition = (type: string) => conditions().find((c) => c.type === type);
const inNs = (res: Resource, name: string) => kube.stored(res, { namespace: ns, name });
// Events (events.k8s.io) are the story of a pass, not objects it creates.
const creates = () => kube.calls.filter((c) => c.method === "create" && c.resource !== "events");
/** Changes the stored SubPool's spec and bumps its generation, as an edit would. */
const editSpec = (spec: Record<string, unknown>) => {
  const current = pool();
  kube.seed(subPoolResource, {
    ...current,
    metadata: {
      ...current.metadata,
      generation: (current.metadata.generation ?? 1) + 1,
      resourceVersion: undefined,
    },
    spec: { ...(current.spec as object), ...spec },
  });
};
const markDeleted = () => {
  const current = pool();
  kube.seed(subPoolResource, {
    ...current,
    metadata: { ...current.metadata, deletionTimestamp: "2026-11-30T12:00:00Z", resourceVersion: undefined },
  });
};
/** The pool's StatefulSet ready and the proxy gateway's EndpointSlice serving, as the cluster would make them. */
function seedRunning(): void {
  const sts = inNs(Resources.StatefulSet, "demo-cpa-manager")!;
  kube.seed(Resources.StatefulSet, { ...sts, status: { replicas: 1, readyReplicas: 1 } });
  kube.seed(endpointSliceResource, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "mihomo-abc",
      namespace: "subrelay-system",
      labels: { "kubernetes.io/service-name": "mihomo" },
    },
    endpoints: [{ addresses: ["10.0.0.9"], conditions: { ready: true } }],
  });
}
async function converge(spec: Record<string, unknown> = {}): Promise<void> {
  kube.seed(subPoolResource, subPoolObject(spec));
  await pass();
  kube.calls.length = 0;
  recorded.sent.length = 0;
}

describe("SubPool pass over the fake Kube", () => {
  it("creates the Namespace and every owned object with a controller ref, finalizer first", async () => {
    kube.seed(subPoolResource, subPoolObject());
    const result = await pass();

    // Waiting for its StatefulSet's Pod (no event brings that): looked at again within seconds.
    expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: true });
    expect(kube.calls.find((c) => c.method !== "get")).toMatchObject({
      method: "patch",
      resource: "subpools",
    });
    expect(pool().metadata.finalizers).toEqual([subPoolFinalizer]);

    const namespace = kube.stored(Resources.Namespace, { name: ns })!;
    expect(namespace.metadata.labels).toEqual({
      [subPoolManagedLabel]: "subpool-operator",
      [subPoolPoolLabel]: "demo",
    });
    for (const object of [namespace, ...ownedKinds.map(([res, name]) => inNs(res, name)!)]) {
      expect(object.metadata.ownerReferences).toEqual([
        {
          apiVersion: "subrelay.example.com/v1alpha1",
          kind: "SubPool",
          name: "demo",
          uid: poolUid,
          controller: true,
        },
      ]);
    }
    // kubefn's grant on what the pool derives comes with the Namespace (it holds none cluster-wide).
    expect(inNs(Resources.RoleBinding, "kubefn-subpool-objects")).toMatchObject({
      roleRef: { kind: "ClusterRole", name: "kubefn-subpool-objects" },
      subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
    });
    expect(creates().map((c) => c.resource)).toEqual([
      "namespaces",
      "rolebindings",
      "secrets",
      "serviceaccounts",
      "configmaps",
      "resourcequotas",
      "networkpolicies",
      "services",
      "statefulsets",
      "poddisruptionbudgets",
    ]);
    expect(pool().status).toMatchObject({
      observedGeneration: 1,
      namespace: ns,
      cpaService: "demo-cpa.subpool-demo.svc:8080",
    });
    expect(condition("Ready")).toMatchObject({
      status: "False",
      reason: "StatefulSetNotReady",
      observedGeneration: 1,
    });
    expect(condition("ProxyGatewayReady")).toMatchObject({ status: "False", reason: "ProxyGatewayNotReady" });
    expect(condition("Suspended")).toMatchObject({ status: "False", reason: "Active" });
    expect(condition("RouteReady")).toBeUndefined();
  });

  it("a new pool's Secret and derived objects are created at once in the Namespace its pass made, after the first alone (its binding may not be in force)", async () => {
    kube.seed(subPoolResource, subPoolObject());
    let inFlight = 0;
    let peak = 0;
    /** Creates in flight as each create inside the Namespace went out. */
    const started: number[] = [];
    const fake = kube;
    ctx.kube = new Proxy(fake, {
      get(target, prop) {
        if (prop === "create") {
          return async (res: Resource, obj: KubeObject) => {
            peak = Math.max(peak, ++inFlight);
            if (obj.metadata.namespace) started.push(inFlight);
            await new Promise((resolve) => setTimeout(resolve, 5));
            try {
              return await target.create(res, obj);
            } finally {
              inFlight--;
            }
          };
        }
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    expect(await pass()).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: true });
    // The RoleBinding, then one create alone, then the others at once.
    expect(started.slice(0, 2)).toEqual([1, 1]);
    expect(peak).toBe(ownedKinds.length - 1);
    for (const [res, name] of ownedKinds) expect(inNs(res, name)).toBeDefined();
  });

  it("a second pass over a converged pool makes zero writes", async () => {
    await converge();
    const result = await pass();
    expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: false });
    expect(kube.writes()).toBe(0);
  });

  it("reports Ready once the StatefulSet and the proxy gateway are ready", async () => {
    await converge();
    seedRunning();
    await pass();
    expect(condition("Ready")).toMatchObject({ status: "True", reason: "Ready" });
    expect(condition("ProxyGatewayReady")).toMatchObject({ status: "True", reason: "EndpointReady" });
  });

  describe("a waiting look (the follow-up of a pool waiting to become Ready)", () => {
    const reads = () =>
      kube.calls
        .filter((c) => c.method === "get" || c.method === "list")
        .map((c) => `${c.method} ${c.resource}`);
    const lookMessage = (): PassMessage => recorded.sent.at(-1)!.messages[0]!;

    it("reads the SubPool, its StatefulSet and the proxy gateway alone, and becomes Ready", async () => {
      kube.seed(subPoolResource, subPoolObject());
      await pass();
      const look = lookMessage();
      expect(look.trigger).toEqual({ kind: "follow-up", reason: "waiting" });
      kube.calls.length = 0;
      const still = await runPass(ctx, registry, look);
      expect(still).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: false });
      expect(reads()).toEqual(["get subpools", "get statefulsets", "list endpointslices"]);

      seedRunning();
      await runPass(ctx, registry, lookMessage());
      expect(condition("Ready")).toMatchObject({ status: "True", reason: "Ready" });
    });

    it("issue 33: the pass intake sends for the StatefulSet's status write is a look too, and a Ready pool losing its replica turns False", async () => {
      kube.seed(subPoolResource, subPoolObject());
      await pass();
      seedRunning();
      await runPass(ctx, registry, lookMessage());
      expect(condition("Ready")).toMatchObject({ status: "True", reason: "Ready" });
      const sts = inNs(Resources.StatefulSet, "demo-cpa-manager")!;
      kube.seed(Resources.StatefulSet, { ...sts, status: { replicas: 1, readyReplicas: 0 } });
      kube.calls.length = 0;
      const event: PassMessage = { ...message, trigger: { kind: "audit", reason: "owned-status" } };
      const result = await runPass(ctx, registry, event);
      expect(reads()).toEqual(["get subpools", "get statefulsets", "list endpointslices"]);
      expect(condition("Ready")).toMatchObject({ status: "False", reason: "StatefulSetNotReady" });
      // Waiting again: the fallback look, in case no event reports the replica back.
      expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: true });
    });

    it("after a spec edit it is a whole pass: the edit is applied, not only looked at", async () => {
      kube.seed(subPoolResource, subPoolObject());
      await pass();
      const look = lookMessage();
      editSpec({ suspend: true });
      kube.calls.length = 0;
      await runPass(ctx, registry, look);
      expect(reads()).toContain("get namespaces");
      expect(condition("Suspended")).toMatchObject({ status: "True" });
    });

    it("a deleted owned object is not recreated by the look; the whole pass its event brings does", async () => {
      kube.seed(subPoolResource, subPoolObject());
      await pass();
      const look = lookMessage();
      await kube.delete(Resources.NetworkPolicy, { namespace: ns, name: "demo" });
      await runPass(ctx, registry, look);
      expect(inNs(Resources.NetworkPolicy, "demo")).toBeUndefined();
      await runPass(ctx, registry, { ...message, trigger: { kind: "audit", reason: "owned-status" } });
      expect(inNs(Resources.NetworkPolicy, "demo")).toBeUndefined();
      await runPass(ctx, registry, { ...message, trigger: { kind: "audit" } });
      expect(inNs(Resources.NetworkPolicy, "demo")).toBeDefined();
    });
  });

  describe("a pass the sweep sent on its fresh lists because only the status differs", () => {
    /** The drift message the sweep sends once the StatefulSet is ready: its lists attached. */
    const driftMessage = (reason: string, listedAgoSeconds = 1): PassMessage => {
      const listedAt = ctx.clock.now().getTime() - listedAgoSeconds * 1000;
      const listed = ownedKinds
        .filter(([res]) => res !== Resources.Secret)
        .map(([res, name]) => inNs(res, name)!);
      return { ...message, trigger: { kind: "drift", reason }, listedAt, listed };
    };
    const reads = () =>
      kube.calls
        .filter((c) => c.method === "get" || c.method === "list")
        .map((c) => `${c.method} ${c.resource}`);
    const becomeReady = async () => {
      await converge();
      const sts = inNs(Resources.StatefulSet, "demo-cpa-manager")!;
      kube.seed(Resources.StatefulSet, { ...sts, status: { replicas: 1, readyReplicas: 1 } });
      kube.calls.length = 0;
    };

    it("reads nothing its lists showed in place (Namespace, Secret, LimitRange, HTTPRoute) and patches the status", async () => {
      await becomeReady();
      const result = await runPass(ctx, registry, driftMessage("status:Ready"));
      expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: true });
      // The pool itself, read from the API server (no body stands in for it), and the proxy
      // gateway's EndpointSlices: no pool owns them, so no list of the pool's shows them.
      expect(reads()).toEqual(["get subpools", "list endpointslices"]);
      const writes = kube.calls.filter((c) => !["get", "list"].includes(c.method) && c.resource !== "events");
      expect(writes.map((c) => `${c.method} ${c.resource}`)).toEqual(["patchStatus subpools"]);
      expect(condition("Ready")).toMatchObject({ status: "False", reason: "ProxyGatewayNotReady" });
    });

    it.each([
      ["another drift reason (a derived object changed)", "changed:ConfigMap", 1],
      ["lists older than they are trusted", "status:Ready", 60],
    ])("reads everything again for %s", async (_, reason, listedAgoSeconds) => {
      await becomeReady();
      await runPass(ctx, registry, driftMessage(reason, listedAgoSeconds));
      expect(reads()).toEqual(expect.arrayContaining(["get namespaces", "get secrets", "list limitranges"]));
      expect(condition("Ready")).toMatchObject({ status: "False", reason: "ProxyGatewayNotReady" });
    });
  });

  it("the passes of one invocation list the proxy gateway's EndpointSlices once", async () => {
    await converge();
    const invocation = { ...ctx, memo: createSweepMemo(30_000) };
    await runPass(invocation, registry, message);
    await runPass(invocation, registry, message);
    expect(kube.calls.filter((c) => c.resource === "endpointslices")).toHaveLength(1);
    await runPass(ctx, registry, message);
    expect(kube.calls.filter((c) => c.resource === "endpointslices")).toHaveLength(2);
  });

  it("issue 33: the passes a pool's own events and waiting looks bring take the proxy gateway's readiness an earlier invocation listed up to 30 s ago; the sweep's passes list it afresh", async () => {
    // A controller of its own: what it holds is no other test's.
    const own = createRegistry([subPoolController({ randomBytes: (n) => new Uint8Array(n).fill(7) })]);
    let now = new Date("2026-11-30T12:00:00Z");
    const invocation = () => ({ ...ctx, clock: { now: () => now }, memo: createSweepMemo(30_000) });
    const lists = () => kube.calls.filter((c) => c.resource === "endpointslices").length;
    const ownedStatus: PassMessage = { ...message, trigger: { kind: "audit", reason: "owned-status" } };
    kube.seed(subPoolResource, subPoolObject());
    await runPass(invocation(), own, { ...message, trigger: { kind: "audit", reason: "created" } });
    expect(lists()).toBe(1);
    const look = recorded.sent.at(-1)!.messages[0]!;
    expect(look.trigger).toEqual({ kind: "follow-up", reason: "waiting" });

    // The StatefulSet and the gateway become ready. Its status write's look (another invocation,
    // 15 s later) and the waiting look take the readiness the creation's pass listed: the
    // StatefulSet ready, the gateway not.
    seedRunning();
    now = new Date(now.getTime() + 15_000);
    await runPass(invocation(), own, ownedStatus);
    await runPass(invocation(), own, look);
    expect(lists()).toBe(1);
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "ProxyGatewayNotReady" });

    // The pass the shared look sends for the gateway's change lists it afresh, and sees it ready.
    await runPass(invocation(), own, { ...message, trigger: { kind: "drift", reason: "shared-look" } });
    expect(lists()).toBe(2);
    expect(condition("Ready")).toMatchObject({ status: "True", reason: "Ready" });

    // Older than 30 s, a list is not taken: the next invocation lists again.
    now = new Date(now.getTime() + 31_000);
    await runPass(invocation(), own, ownedStatus);
    expect(lists()).toBe(3);
    // Outside an invocation every pass lists.
    await runPass({ ...ctx, clock: { now: () => now } }, own, ownedStatus);
    expect(lists()).toBe(4);
  });

  it.each([
    [
      "envelope exceeded",
      { cpa: { image: "cpa:1", resources: { requests: { cpu: "2", memory: "1Gi" } } } },
      undefined,
      "ResourceEnvelopeExceeded",
    ],
    [
      "bad image",
      { cpa: { image: "Bad Image", resources: { requests: { cpu: "1", memory: "1Gi" } } } },
      undefined,
      "InvalidSpec",
    ],
    [
      "Gateway mode without a Gateway",
      { exposure: { mode: "Gateway" } },
      undefined,
      "GatewayConfigIncomplete",
    ],
  ])(
    "an invalid pool (%s) leaves zero objects and latches without retry",
    async (_, spec, _unused, reason) => {
      kube.seed(subPoolResource, subPoolObject(spec));
      const result = await pass();
      expect(result).toMatchObject({ result: "error", errorClass: "permanent", errorReason: reason });
      expect(result.followUpSeconds).toBeUndefined();
      expect(creates()).toEqual([]);
      expect(kube.stored(Resources.Namespace, { name: ns })).toBeUndefined();
      expect(condition("Ready")).toMatchObject({ status: "False", reason, observedGeneration: 1 });

      kube.calls.length = 0;
      await pass();
      expect(kube.writes()).toBe(0);
    },
  );

  it("a foreign Namespace of the derived name gives NamespaceConflict and is left untouched", async () => {
    const foreign = kube.seed(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns, labels: { team: "someone-else" } },
    });
    kube.seed(subPoolResource, subPoolObject());
    const result = await pass();
    expect(result).toMatchObject({ result: "awaitSweep" });
    expect(result.followUpSeconds).toBeUndefined();
    expect(condition("Ready")).toMatchObject({
      status: "False",
      reason: "NamespaceConflict",
      message: "Namespace subpool-demo exists and is not controlled by any object; it is never adopted",
    });
    expect(kube.stored(Resources.Namespace, { name: ns })).toEqual(foreign);
    // A pool that never converged tries the create first; the API server refuses it.
    expect(
      kube.calls
        .filter((c) => c.method !== "get" && c.resource !== "subpools" && c.resource !== "events")
        .map((c) => c.method),
    ).toEqual(["create"]);
  });

  it("never overwrites an existing credential Secret of the pool", async () => {
    await converge();
    const secret = inNs(Resources.Secret, "demo-credentials")!;
    kube.seed(Resources.Secret, { ...secret, data: { username: "b2xk", password: "b2xkLXBhc3M=" } });
    await pass();
    expect(inNs(Resources.Secret, "demo-credentials")!.data).toEqual({
      username: "b2xk",
      password: "b2xkLXBhc3M=",
    });
    expect(kube.calls.filter((c) => c.resource === "secrets" && c.method !== "get")).toEqual([]);
  });

  it("generates credentials only when the Secret is missing", async () => {
    await converge();
    const first = inNs(Resources.Secret, "demo-credentials")!.data as Record<string, string>;
    expect(atob(first.password!)).toMatch(/^(07){32}$/);
    expect(atob(first.username!)).toBe("cpa-070707070707");
  });

  it("a Secret someone else holds gives CredentialConflict and is left alone", async () => {
    kube.seed(subPoolResource, subPoolObject());
    await pass();
    const secret = inNs(Resources.Secret, "demo-credentials")!;
    const foreign = kube.seed(Resources.Secret, {
      ...secret,
      metadata: { ...secret.metadata, ownerReferences: [] },
    });
    await pass();
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "CredentialConflict" });
    expect(inNs(Resources.Secret, "demo-credentials")).toEqual(foreign);
  });

  it("a foreign object in the Namespace gives ManagedResourceConflict", async () => {
    await converge();
    const svc = inNs(Resources.Service, "demo-cpa")!;
    kube.seed(Resources.Service, { ...svc, metadata: { ...svc.metadata, ownerReferences: undefined } });
    await pass();
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "ManagedResourceConflict" });
    expect(condition("Ready")!.message).toMatch(
      /Service subpool-demo\/demo-cpa exists and is not controlled by any object/,
    );
  });

  it("syncs only the Service's type, ports and selector: clusterIP and others' labels are kept", async () => {
    await converge();
    const svc = inNs(Resources.Service, "demo-cpa")! as KubeObject & { spec: Record<string, unknown> };
    kube.seed(Resources.Service, {
      ...svc,
      metadata: { ...svc.metadata, labels: { ...svc.metadata.labels, "mesh.example/injected": "true" } },
      spec: {
        ...svc.spec,
        clusterIP: "10.96.0.42",
        clusterIPs: ["10.96.0.42"],
        ports: [{ name: "http", port: 9999 }],
      },
    });
    await pass();
    const after = inNs(Resources.Service, "demo-cpa")! as KubeObject & { spec: Record<string, unknown> };
    expect(after.spec.clusterIP).toBe("10.96.0.42");
    expect(after.spec.ports).toEqual([{ name: "http", port: 8080, targetPort: "http", protocol: "TCP" }]);
    expect(after.metadata.labels?.["mesh.example/injected"]).toBe("true");
    expect(kube.calls.filter((c) => c.method === "update").map((c) => c.resource)).toEqual(["services"]);
  });

  it("suspend scales the StatefulSet to 0 and keeps the Namespace, PVC and Secret", async () => {
    await converge();
    kube.seed(Resources.PersistentVolumeClaim, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data-demo-cpa-manager-0", namespace: ns },
    });
    editSpec({ suspend: true });
    const result = await pass();
    expect(result).toMatchObject({ result: "done" });
    expect((inNs(Resources.StatefulSet, "demo-cpa-manager")!.spec as { replicas: number }).replicas).toBe(0);
    expect(kube.stored(Resources.Namespace, { name: ns })).toBeDefined();
    expect(inNs(Resources.PersistentVolumeClaim, "data-demo-cpa-manager-0")).toBeDefined();
    expect(inNs(Resources.Secret, "demo-credentials")).toBeDefined();
    expect(kube.calls.filter((c) => c.method === "delete")).toEqual([]);
    expect(condition("Suspended")).toMatchObject({
      status: "True",
      reason: "Suspended",
      observedGeneration: 2,
    });
    expect(condition("ProxyGatewayReady")).toMatchObject({ status: "Unknown", reason: "Suspended" });
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "Suspended" });

    editSpec({ suspend: false });
    await pass();
    expect((inNs(Resources.StatefulSet, "demo-cpa-manager")!.spec as { replicas: number }).replicas).toBe(1);
    expect(condition("Suspended")).toMatchObject({ status: "False", reason: "Active" });
  });

  it("Gateway mode creates the HTTPRoute; suspend or Internal mode deletes it", async () => {
    const gateway = {
      mode: "Gateway",
      hostname: "demo.example.com",
      gateway: { name: "public", namespace: "gw" },
    };
    await converge({ exposure: gateway });
    const route = inNs(httpRouteResource, "demo")!;
    expect(route.spec).toMatchObject({
      hostnames: ["demo.example.com"],
      parentRefs: [{ name: "public", namespace: "gw" }],
    });
    expect(condition("RouteReady")).toMatchObject({ status: "False", reason: "RouteNotReady" });
    expect(pool().status).toMatchObject({ hostname: "demo.example.com" });

    editSpec({ suspend: true });
    await pass();
    expect(inNs(httpRouteResource, "demo")).toBeUndefined();
    expect(condition("RouteReady")).toMatchObject({ status: "False", reason: "Suspended" });

    editSpec({ suspend: false });
    await pass();
    expect(inNs(httpRouteResource, "demo")).toBeDefined();

    editSpec({ exposure: { mode: "Internal" } });
    await pass();
    expect(inNs(httpRouteResource, "demo")).toBeUndefined();
    expect(condition("RouteReady")).toBeUndefined();
    expect(pool().status).not.toHaveProperty("hostname");
  });

  it("reports GatewayAPIMissing when HTTPRoute is not served, and still ensures the rest", async () => {
    await converge();
    editSpec({
      exposure: {
        mode: "Gateway",
        hostname: "demo.example.com",
        gateway: { name: "public", namespace: "gw" },
      },
    });
    kube.fail(
      "create",
      new NotFoundError("the server could not find the requested resource", {
        status: 404,
        reason: "NotFound",
      }),
    );
    const result = await pass();
    expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15 });
    expect(condition("RouteReady")).toMatchObject({ status: "False", reason: "GatewayAPIMissing" });
    expect(inNs(Resources.StatefulSet, "demo-cpa-manager")).toBeDefined();
  });

  it("deletes a legacy LimitRange the pool owns, and only that one", async () => {
    await converge();
    const ref = inNs(Resources.Service, "demo-cpa")!.metadata.ownerReferences;
    const labels = { [subPoolPoolLabel]: "demo" };
    kube.seed(Resources.LimitRange, {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: "demo-limits", namespace: ns, labels, ownerReferences: ref },
    });
    kube.seed(Resources.LimitRange, {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: "team-limits", namespace: ns, labels },
    });
    await pass();
    expect(inNs(Resources.LimitRange, "demo-limits")).toBeUndefined();
    expect(inNs(Resources.LimitRange, "team-limits")).toBeDefined();
  });

  describe("deletion", () => {
    it("deletes the Namespace, waits for it, then removes the finalizer", async () => {
      await converge();
      markDeleted();
      const first = await pass();
      expect(first).toMatchObject({ result: "requeue", followUpSeconds: 5 });
      expect(kube.calls.filter((c) => c.method === "delete").map((c) => c.resource)).toEqual(["namespaces"]);
      expect(pool().metadata.finalizers).toEqual([subPoolFinalizer]);
      expect(condition("Ready")).toMatchObject({ status: "False", reason: "DeletionBlocked" });

      await pass();
      // The last finalizer of a deleting object gone, the API server (and FakeKube) deletes it.
      expect(pool()).toBeUndefined();
    });

    it("keeps the finalizer while the Namespace is terminating, with the blocker in the message", async () => {
      await converge();
      const namespace = kube.stored(Resources.Namespace, { name: ns })!;
      kube.seed(Resources.Namespace, {
        ...namespace,
        metadata: { ...namespace.metadata, deletionTimestamp: "2026-11-30T12:00:00Z" },
        status: {
          phase: "Terminating",
          conditions: [
            {
              type: "NamespaceFinalizersRemaining",
              status: "True",
              message: "kubernetes.io/pvc-protection in 1 resource instances",
            },
          ],
        },
      });
      markDeleted();
      for (let i = 0; i < 2; i++) {
        expect(await pass()).toMatchObject({ result: "requeue", followUpSeconds: 5 });
        expect(pool().metadata.finalizers).toEqual([subPoolFinalizer]);
      }
      expect(kube.calls.filter((c) => c.method === "delete")).toEqual([]);
      expect(condition("Ready")!.message).toMatch(
        /NamespaceFinalizersRemaining: kubernetes.io\/pvc-protection/,
      );

      await kube.delete(Resources.Namespace, { name: ns });
      expect(await pass()).toMatchObject({ result: "done" });
      // The last finalizer of a deleting object gone, the API server (and FakeKube) deletes it.
      expect(pool()).toBeUndefined();
    });

    it("does not delete a Namespace that is not the pool's; only removes the finalizer", async () => {
      const foreign = kube.seed(Resources.Namespace, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns },
      });
      kube.seed(
        subPoolResource,
        subPoolObject({}, { finalizers: [subPoolFinalizer], deletionTimestamp: "2026-11-30T12:00:00Z" }),
      );
      expect(await pass()).toMatchObject({ result: "done" });
      expect(kube.stored(Resources.Namespace, { name: ns })).toEqual(foreign);
      // The last finalizer of a deleting object gone, the API server (and FakeKube) deletes it.
      expect(pool()).toBeUndefined();
    });

    it("with no finalizer of ours, does nothing", async () => {
      kube.seed(
        subPoolResource,
        subPoolObject({}, { finalizers: ["other/finalizer"], deletionTimestamp: "2026-11-30T12:00:00Z" }),
      );
      expect(await pass()).toMatchObject({ result: "done" });
      expect(kube.calls.filter((c) => c.method !== "get" && c.method !== "patchStatus")).toEqual([]);
      expect(pool().metadata.finalizers).toEqual(["other/finalizer"]);
    });
  });
});

describe("the operator configuration is immutable for the process", () => {
  /** A second process with a lower envelope (the first one's is the default 2 CPU / 4Gi). */
  const lowered = (maxCPU: string, maxMemory: string) => {
    const parsed = parseOperatorConfig({ maxCPU, maxMemory });
    if (!parsed.ok) throw new Error(parsed.message);
    return createRegistry([
      subPoolController({ operatorConfig: parsed.config, randomBytes: (n) => new Uint8Array(n).fill(7) }),
    ]);
  };

  it("no pass reads a configuration from the cluster", async () => {
    await converge();
    await pass();
    expect(kube.calls.filter((c) => c.resource === "configmaps" && c.key?.namespace !== ns)).toEqual([]);
  });

  it("lowering the envelope never turns a running pool into a permanent error: it still reconciles and can be suspended", async () => {
    await converge(); // 750m / 768Mi under the default envelope
    const restarted = lowered("500m", "512Mi");
    const result = await runPass(ctx, restarted, message);
    expect(result.result).not.toBe("error");
    expect(condition("Ready")?.reason).not.toBe("ResourceEnvelopeExceeded");
    // Its quota still admits what it runs with, so a restarted Pod is not refused.
    expect(
      (inNs(Resources.ResourceQuota, "demo-quota")!.spec as { hard: Record<string, string> }).hard,
    ).toMatchObject({ "requests.cpu": "750m", "requests.memory": "805306368" });

    editSpec({ suspend: true });
    expect(await runPass(ctx, restarted, message)).toMatchObject({ result: "done" });
    expect((inNs(Resources.StatefulSet, "demo-cpa-manager")!.spec as { replicas: number }).replicas).toBe(0);
    expect(condition("Suspended")).toMatchObject({ status: "True" });

    editSpec({ suspend: false });
    expect((await runPass(ctx, restarted, message)).result).not.toBe("error");
    expect((inNs(Resources.StatefulSet, "demo-cpa-manager")!.spec as { replicas: number }).replicas).toBe(1);
  });

  it("003: a running pool above a lowered envelope says so on AboveEnvelope (Ready unaffected), with one Event; back under it, the condition goes", async () => {
    await converge();
    const readyBefore = condition("Ready");
    const restarted = lowered("500m", "512Mi");
    const envelopeEvents = () =>
      kube.calls.filter(
        (c) =>
          c.method === "create" &&
          c.resource === "events" &&
          (c.body as { reason?: string }).reason === "ResourceEnvelopeExceeded",
      );
    await runPass(ctx, restarted, message);
    expect(condition("AboveEnvelope")).toMatchObject({
      status: "True",
      reason: "ResourceEnvelopeExceeded",
      message: expect.stringContaining("admitted under an earlier one"),
    });
    expect(condition("Ready")).toEqual(readyBefore);
    expect(envelopeEvents()).toHaveLength(1);
    expect(envelopeEvents()[0]!.body).toMatchObject({ type: "Warning" });
    // Every later pass keeps it quietly: the Event is recorded once.
    await runPass(ctx, restarted, message);
    expect(envelopeEvents()).toHaveLength(1);
    // A process with the envelope raised again: the pool is within it, the condition goes.
    await pass();
    expect(condition("AboveEnvelope")).toBeUndefined();
    expect(condition("Ready")).toEqual(readyBefore);
  });

  it("a lowered envelope still refuses growth beyond what the pool runs with", async () => {
    await converge();
    const restarted = lowered("500m", "512Mi");
    editSpec({
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "1", memory: "512Mi" } } },
    });
    const result = await runPass(ctx, restarted, message);
    expect(result).toMatchObject({ result: "error", errorReason: "ResourceEnvelopeExceeded" });
    expect(condition("Ready")).toMatchObject({ status: "False", reason: "ResourceEnvelopeExceeded" });
  });

  it("a new pool over a lowered envelope is refused and nothing is created", async () => {
    kube.seed(subPoolResource, subPoolObject());
    const result = await runPass(ctx, lowered("500m", "512Mi"), message);
    expect(result).toMatchObject({ result: "error", errorReason: "ResourceEnvelopeExceeded" });
    expect(creates()).toEqual([]);
  });
});
