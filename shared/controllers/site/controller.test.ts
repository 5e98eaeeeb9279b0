import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { classifyError } from "../../kube/classify.ts";
import type { Condition } from "../../kube/conditions.ts";
import { NotFoundError, ServerError } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { type Context, createRegistry, runPass } from "../../runtime/index.ts";
import { siteResource } from "./api.ts";
import {
  type ClusterComponent,
  failed,
  notReady,
  notReadyAfter,
  type Registry,
  type Result,
  reconciled,
  type SiteComponent,
} from "./component.ts";
import { defaultSiteRegistry } from "./components/index.ts";
import {
  type ComponentResult,
  outcomeOf,
  publishConditions,
  SiteComponentsError,
  siteController,
} from "./controller.ts";

const config = {
  imageRegistry: "ghcr.io/unbounded",
  imageTag: "v1",
  apiServerEndpoint: "https://10.0.0.1:6443",
};
const ns = "kubefn-system";
const siteObject = (name: string, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "unbounded-cloud.io/v1alpha3",
  kind: "Site",
  metadata: { name, uid: `uid-${name}`, generation: 1 },
  spec,
});
const r = (component: string, result: Result): ComponentResult => ({
  component,
  conditionType: `${component[0]!.toUpperCase()}${component.slice(1)}Ready`,
  result,
});

describe("outcomeOf", () => {
  it.each<[string, ComponentResult[], unknown]>([
    ["no components", [], { kind: "done" }],
    ["all reconciled", [r("a", reconciled()), r("b", reconciled())], { kind: "done" }],
    ["not ready without a delay schedules nothing", [r("a", notReady("Waiting", "x"))], { kind: "done" }],
    [
      "smallest positive requeue wins",
      [
        r("a", notReadyAfter("P", "x", 30)),
        r("b", notReadyAfter("P", "x", 10)),
        r("c", notReadyAfter("P", "x", 0)),
      ],
      { kind: "requeue", afterSeconds: 10 },
    ],
  ])("%s", (_name, results, expected) => {
    expect(outcomeOf(results)).toEqual(expected);
  });

  it("any error fails the pass, aggregating every component's error", () => {
    const outcome = outcomeOf([
      r("a", failed(new Error("a broke"))),
      r("b", notReadyAfter("P", "x", 5)),
      r("c", failed(new Error("c broke"))),
    ]);
    expect(outcome.kind).toBe("error");
    const err = (outcome as { error: SiteComponentsError }).error;
    expect(err).toBeInstanceOf(SiteComponentsError);
    expect(err.message).toBe("a: a broke; c: c broke");
    expect(err.failures.map((f) => f.component)).toEqual(["a", "c"]);
  });

  it("classifies through the first retryable error, so a permanent one does not stop retries", () => {
    const permanent = new NotFoundError("gone", { status: 404, reason: "NotFound" });
    const transient = new ServerError("down", { status: 503, reason: "ServiceUnavailable" });
    const outcome = outcomeOf([r("a", failed(permanent)), r("b", failed(transient))]);
    expect((outcome as { error: Error }).error.cause).toBe(transient);
  });

  it("a Site whose component errors are all permanent-class backs off rather than waiting for resync", () => {
    const permanent = new NotFoundError("gone", { status: 404, reason: "NotFound" });
    const onlyPermanent = outcomeOf([r("a", failed(permanent))]);
    const err = (onlyPermanent as { error: Error }).error;
    expect(classifyError(err)).toEqual({ class: "transient", reason: "NotFound" });
    expect((err.cause as Error).cause).toBe(permanent);
  });
});

describe("publishConditions", () => {
  const now = new Date("2026-11-30T12:00:00Z");
  const order = ["NetReady", "MetalmanReady", "StorageReady"];
  const cond = (type: string, status: "True" | "False", time = "2026-01-01T00:00:00Z"): Condition => ({
    type,
    status,
    reason: "Reconciled",
    message: "component reconciled",
    observedGeneration: 1,
    lastTransitionTime: time,
  });

  it("orders registry conditions first, in registry order, keeping foreign ones after", () => {
    const existing = [cond("StorageReady", "True"), cond("Foreign", "True"), cond("NetReady", "True")];
    const results: ComponentResult[] = order.map((type) => ({
      component: type,
      conditionType: type,
      result: reconciled(),
    }));
    const out = publishConditions(existing, results, order, now, 1);
    expect(out.map((c) => c.type)).toEqual(["NetReady", "MetalmanReady", "StorageReady", "Foreign"]);
    expect(out[0]!.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
    expect(out[1]!.lastTransitionTime).toBe("2026-11-30T12:00:00Z");
  });

  it("moves lastTransitionTime only when the status flips", () => {
    const out = publishConditions(
      [cond("NetReady", "True")],
      [{ component: "net", conditionType: "NetReady", result: failed(new Error("x")) }],
      order,
      now,
      1,
    );
    expect(out[0]).toMatchObject({ status: "False", reason: "ReconcileError", message: "x" });
    expect(out[0]!.lastTransitionTime).toBe("2026-11-30T12:00:00Z");
  });
});

const conditionsOf = (obj: KubeObject | undefined) =>
  ((obj?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).map((c) => ({
    type: c.type,
    status: c.status,
    reason: c.reason,
  }));

describe("siteController over a fake Kube (runPass)", () => {
  let kube: FakeKube;
  let ctx: Context;
  let sent: ReturnType<typeof fakeContext>["recorded"]["sent"];
  const registryOf = (components: Registry) =>
    createRegistry([siteController({ registry: components, env: { config } })]);
  const pass = (registry: ReturnType<typeof registryOf>, name: string) =>
    runPass(ctx, registry, { request: { controller: "site", name }, attempt: 0 });

  beforeEach(() => {
    kube = new FakeKube();
    const fake = fakeContext(kube);
    ctx = fake.ctx;
    sent = fake.recorded.sent;
  });

  it("publishes one condition per component in registry order and applies their objects", async () => {
    kube.seed(siteResource, siteObject("west"));
    const result = await pass(registryOf(defaultSiteRegistry()), "west");
    expect(result).toMatchObject({ result: "done", wroteStatus: true });
    expect(conditionsOf(kube.stored(siteResource, { name: "west" }))).toEqual([
      { type: "NetReady", status: "True", reason: "Reconciled" },
      { type: "MachinaReady", status: "True", reason: "Reconciled" },
      { type: "MetalmanReady", status: "True", reason: "Reconciled" },
      { type: "StorageReady", status: "True", reason: "Reconciled" },
      { type: "Ready", status: "True", reason: "Reconciled" },
    ]);
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "net-config" })?.data).toMatchObject({
      sites: "west",
      "apiserver-endpoint": config.apiServerEndpoint,
    });
    expect(kube.stored(Resources.ServiceAccount, { namespace: ns, name: "net" })).toBeDefined();
    // The ServiceAccount metalman's Deployment runs as: applied by metalman, not by net.
    expect(kube.stored(Resources.ServiceAccount, { namespace: ns, name: "metalman" })).toBeDefined();
    expect(
      kube.calls.filter(
        (c) => c.resource === "serviceaccounts" && c.key?.name === "metalman" && c.method === "patch",
      ),
    ).toHaveLength(1);
    const deployment = kube.stored(Resources.Deployment, { namespace: ns, name: "metalman-west" });
    expect(deployment?.metadata.ownerReferences).toEqual([
      {
        apiVersion: "unbounded-cloud.io/v1alpha3",
        kind: "Site",
        name: "west",
        uid: "uid-west",
        controller: true,
      },
    ]);
    expect(JSON.stringify(deployment)).toContain("ghcr.io/unbounded/metalman:v1");
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "storage-west" })).toBeDefined();
    const applies = kube.calls.filter((c) => c.method === "patch") as {
      body: { fieldManager: string; force: boolean };
    }[];
    expect(applies.length).toBeGreaterThan(0);
    for (const call of applies)
      expect(call.body).toMatchObject({ fieldManager: "unbounded-operator", force: true });
  });

  it("MachinaReady and MetalmanReady report their Deployments running, not applied", async () => {
    kube = new FakeKube(() => new Date()); // Deployments created now: progressing for 0 s
    ctx = fakeContext(kube).ctx;
    kube.rollsOutDeployments = false; // no Deployment controller: nothing ever becomes available
    kube.seed(siteResource, siteObject("west"));
    const registry = registryOf(defaultSiteRegistry());
    const first = await pass(registry, "west");
    // Waiting on an unwatched status: re-checked within seconds, not left to the drift period.
    expect(first).toMatchObject({ result: "requeue", followUpSeconds: 5 });
    expect(conditionsOf(kube.stored(siteResource, { name: "west" }))).toEqual([
      { type: "NetReady", status: "True", reason: "Reconciled" },
      { type: "MachinaReady", status: "False", reason: "DeploymentProgressing" },
      { type: "MetalmanReady", status: "False", reason: "DeploymentProgressing" },
      { type: "StorageReady", status: "True", reason: "Reconciled" },
      { type: "Ready", status: "False", reason: "DeploymentProgressing" },
      { type: "Reconciling", status: "True", reason: "DeploymentProgressing" },
    ]);
    // The workload controller rolls both out; the next pass reports them running.
    for (const name of ["machina", "metalman-west"]) {
      const d = kube.stored(Resources.Deployment, { namespace: ns, name })!;
      await kube.updateStatus(Resources.Deployment, {
        ...d,
        status: { observedGeneration: 0, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
      });
    }
    expect(await pass(registry, "west")).toMatchObject({ result: "done" });
    const stored = kube.stored(siteResource, { name: "west" });
    const conditions = (stored?.status as { conditions: Condition[] } | undefined)?.conditions ?? [];
    expect(conditions.find((c) => c.type === "MetalmanReady")).toMatchObject({
      status: "True",
      message: "metalman-west: 1/1 replicas available",
    });
    expect(conditions.find((c) => c.type === "Ready")).toMatchObject({ status: "True" });
  });

  it("a second pass over a converged Site makes zero writes", async () => {
    kube.seed(siteResource, siteObject("west"));
    const registry = registryOf(defaultSiteRegistry());
    await pass(registry, "west");
    const before = kube.writes();
    const result = await pass(registry, "west");
    expect(result).toMatchObject({ result: "done", wroteStatus: false });
    expect(kube.writes() - before).toBe(0);
  });

  it("re-applies an object that drifted", async () => {
    kube.seed(siteResource, siteObject("west"));
    const registry = registryOf(defaultSiteRegistry());
    await pass(registry, "west");
    const cm = kube.stored(Resources.ConfigMap, { namespace: ns, name: "storage-west" })!;
    kube.seed(Resources.ConfigMap, {
      ...cm,
      data: { site: "tampered" },
      metadata: { ...cm.metadata, resourceVersion: undefined },
    });
    await pass(registry, "west");
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "storage-west" })?.data).toMatchObject({
      site: "west",
    });
  });

  it("a disabled component is cleaned up and reads Disabled", async () => {
    kube.seed(siteResource, siteObject("west"));
    const registry = registryOf(defaultSiteRegistry());
    await pass(registry, "west");
    const stored = kube.stored(siteResource, { name: "west" })!;
    kube.seed(siteResource, {
      ...stored,
      metadata: { ...stored.metadata, resourceVersion: undefined, generation: 2 },
      spec: { components: { storage: { enabled: false } } },
    });
    await pass(registry, "west");
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "storage-west" })).toBeUndefined();
    expect(conditionsOf(kube.stored(siteResource, { name: "west" }))[3]).toEqual({
      type: "StorageReady",
      status: "True",
      reason: "Disabled",
    });
    const before = kube.writes();
    await pass(registry, "west");
    expect(kube.writes() - before).toBe(0);
  });

  it("a metalman override ConfigMap changes the config and rolls the Deployment", async () => {
    kube.seed(siteResource, siteObject("west"));
    const registry = registryOf(defaultSiteRegistry());
    await pass(registry, "west");
    const hashOf = () =>
      (
        kube.stored(Resources.Deployment, { namespace: ns, name: "metalman-west" })!.spec as {
          template: { metadata: { annotations: Record<string, string> } };
        }
      ).template.metadata.annotations["unbounded-cloud.io/config-hash"];
    const first = hashOf();
    kube.seed(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "metalman-config-west", namespace: ns },
      data: { "pxe-boot": "http" },
    });
    await pass(registry, "west");
    expect(
      kube.stored(Resources.ConfigMap, { namespace: ns, name: "metalman-west" })?.data?.["pxe-boot" as never],
    ).toBe("http");
    expect(hashOf()).not.toBe(first);
  });

  describe("with scripted components", () => {
    const calls: string[] = [];
    const cluster = (name: string, type: string, result: () => Result): ClusterComponent => ({
      name,
      conditionType: type,
      reconcile: async (_env, sites) => {
        calls.push(`${name}(${sites.map((s) => s.metadata.name).join(",")})`);
        return result();
      },
    });
    const site = (name: string, type: string, result: () => Result, enabled = true): SiteComponent => ({
      name,
      conditionType: type,
      enabled: () => enabled,
      reconcile: async (_env, s) => {
        calls.push(`${name}:${s.metadata.name}`);
        return result();
      },
      cleanup: async (_env, s) => {
        calls.push(`cleanup ${name}:${s.metadata.name}`);
      },
    });
    beforeEach(() => {
      calls.length = 0;
    });

    it("records every failure in the conditions and fails the pass with the aggregate", async () => {
      kube.seed(siteResource, siteObject("west"));
      const registry = registryOf({
        cluster: [
          cluster("net", "NetReady", () =>
            failed(new ServerError("apiserver down", { status: 503, reason: "ServiceUnavailable" })),
          ),
        ],
        site: [
          site("metalman", "MetalmanReady", () => notReadyAfter("Booting", "waiting", 20)),
          site("storage", "StorageReady", () => {
            throw new Error("thrown, not returned");
          }),
        ],
      });
      const result = await pass(registry, "west");
      expect(result).toMatchObject({ result: "error", errorClass: "transient", wroteStatus: true });
      expect(conditionsOf(kube.stored(siteResource, { name: "west" }))).toEqual([
        { type: "NetReady", status: "False", reason: "ReconcileError" },
        { type: "MetalmanReady", status: "False", reason: "Booting" },
        { type: "StorageReady", status: "False", reason: "ReconcileError" },
        // The first failing component in registry order explains the summary.
        { type: "Ready", status: "False", reason: "ReconcileError" },
      ]);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.messages[0]!.attempt).toBe(1);
    });

    it("requeues after the smallest positive delay", async () => {
      kube.seed(siteResource, siteObject("west"));
      const registry = registryOf({
        cluster: [cluster("net", "NetReady", () => notReadyAfter("P", "x", 45))],
        site: [site("metalman", "MetalmanReady", () => notReadyAfter("P", "x", 15))],
      });
      const result = await pass(registry, "west");
      expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15 });
    });

    it("runs cleanup, not reconcile, for a disabled Site component", async () => {
      kube.seed(siteResource, siteObject("west"));
      const registry = registryOf({
        cluster: [cluster("net", "NetReady", reconciled)],
        site: [site("metalman", "MetalmanReady", reconciled, false)],
      });
      await pass(registry, "west");
      expect(calls).toEqual(["net(west)", "cleanup metalman:west"]);
      expect(conditionsOf(kube.stored(siteResource, { name: "west" }))[1]).toMatchObject({
        reason: "Disabled",
      });
    });

    it("the singleton request runs cluster components only, with every Site, and publishes nothing", async () => {
      kube.seed(siteResource, siteObject("east"));
      kube.seed(siteResource, siteObject("west"));
      const registry = registryOf({
        cluster: [cluster("net", "NetReady", () => notReady("Waiting", "ignored on the Site-less pass"))],
        site: [site("metalman", "MetalmanReady", reconciled)],
      });
      const result = await pass(registry, "__singletons");
      expect(result).toMatchObject({ result: "done", absent: true, wroteStatus: false });
      expect(calls).toEqual(["net(east,west)"]);
      expect(kube.writes()).toBe(0);
    });

    it("a deleted Site gets the Site-less pass without itself", async () => {
      kube.seed(siteResource, siteObject("east"));
      const registry = registryOf({
        cluster: [cluster("net", "NetReady", () => notReadyAfter("P", "x", 30))],
        site: [site("metalman", "MetalmanReady", reconciled)],
      });
      const result = await pass(registry, "west");
      expect(result).toMatchObject({ absent: true, result: "requeue", followUpSeconds: 30 });
      expect(calls).toEqual(["net(east)"]);
    });
  });

  it("net reports NoSites and applies nothing when there are no Sites", async () => {
    const registry = registryOf(defaultSiteRegistry());
    const result = await pass(registry, "__singletons");
    expect(result).toMatchObject({ result: "done", absent: true });
    expect(kube.writes()).toBe(0);
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "net-config" })).toBeUndefined();
  });

  it("declares Site conditions in registry order, owned kinds and merged ConfigMap watches", () => {
    const def = siteController({ registry: defaultSiteRegistry(), env: { config } });
    expect(def.conditionTypes).toEqual(["NetReady", "MachinaReady", "MetalmanReady", "StorageReady"]);
    expect(def.owns?.map((o) => o.kind)).toEqual(["ConfigMap", "Deployment"]);
    expect(def.watches?.map((w) => w.resource.kind)).toEqual(["ConfigMap", "Deployment"]);
    expect(() => siteController({ registry: { cluster: [], site: [] }, env: { config } })).toThrow(
      /no components/,
    );
  });

  it.each([
    ["ConfigMap", "storage-west", { name: "west" }],
    ["ConfigMap", "metalman-west", { name: "west" }],
    ["Deployment", "metalman-west", { name: "west" }],
    ["ConfigMap", "metalman-config-west", undefined],
    ["ConfigMap", "net-config", undefined],
    ["Deployment", "storage-west", undefined],
  ])("ownerFromKey: %s %s → %j", (kind, name, owner) => {
    const def = siteController({ registry: defaultSiteRegistry(), env: { config } });
    const resource = kind === "ConfigMap" ? Resources.ConfigMap : Resources.Deployment;
    expect(def.ownerFromKey?.(resource, { namespace: ns, name })).toEqual(owner);
    expect(def.ownerFromKey?.(resource, { namespace: "default", name })).toBeUndefined();
  });

  it("maps watched ConfigMaps to Sites and the singleton", async () => {
    kube.seed(siteResource, siteObject("west"));
    const [watch] = siteController({ registry: defaultSiteRegistry(), env: { config } }).watches!;
    const map = (name: string) =>
      watch!.map(ctx, { resource: Resources.ConfigMap, key: { namespace: ns, name }, verb: "update" });
    expect(await map("metalman-config-west")).toEqual([{ controller: "site", name: "west" }]);
    expect(await map("net-config")).toEqual([
      { controller: "site", name: "__singletons" },
      { controller: "site", name: "west" },
    ]);
    expect(await map("unrelated")).toEqual([]);
  });
});
