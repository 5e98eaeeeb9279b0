/**
 * Seed 004 behaviours of the component package beyond the driver: the machina cluster component,
 * the metalman ServiceAccount, DefaultConfigMap, CRDs skipped, invalid Sites reported, and the
 * per-component predicates.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import type { Condition } from "../../kube/conditions.ts";
import { ForbiddenError } from "../../kube/errors.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { type Context, createRegistry, mapEvents, runPass } from "../../runtime/index.ts";
import { siteResource } from "./api.ts";
import { failed as failedResult } from "./component.ts";
import { machinaConfigName, operatorManifests } from "./components/bundle.ts";
import { defaultSiteRegistry } from "./components/default-registry.ts";
import { siteController } from "./controller.ts";
import { createEnv, defaultEnvSettings } from "./env.ts";
import { defaultConfigMap } from "./manifests.ts";

const config = {
  imageRegistry: "registry.example.com/unbounded",
  imageTag: "v0.1.24",
  apiServerEndpoint: "https://10.0.0.1:6443",
};
const ns = "kubefn-system";
const siteObject = (name: string, spec: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "unbounded-cloud.io/v1alpha3",
  kind: "Site",
  metadata: { name, uid: `uid-${name}`, generation: 1 },
  spec,
});
const conditionsOf = (obj: KubeObject | undefined) =>
  ((obj?.status as { conditions?: Condition[] } | undefined)?.conditions ?? []).map((c) => ({
    type: c.type,
    status: c.status,
    reason: c.reason,
  }));

let kube: FakeKube;
let ctx: Context;
let recorded: ReturnType<typeof fakeContext>["recorded"];
const registry = () => createRegistry([siteController({ registry: defaultSiteRegistry(), env: { config } })]);
const pass = (name: string) =>
  runPass(ctx, registry(), { request: { controller: "site", name }, attempt: 0 });

beforeEach(() => {
  kube = new FakeKube();
  ({ ctx, recorded } = fakeContext(kube));
});

describe("machina", () => {
  it("publishes MachinaReady and puts the API server endpoint into the machina config", async () => {
    kube.seed(siteResource, siteObject("west"));
    await pass("west");
    expect(conditionsOf(kube.stored(siteResource, { name: "west" }))).toContainEqual({
      type: "MachinaReady",
      status: "True",
      reason: "Reconciled",
    });
    const cm = kube.stored(Resources.ConfigMap, { namespace: ns, name: machinaConfigName });
    expect(cm?.data).toMatchObject({
      "apiserver-endpoint": config.apiServerEndpoint,
      sites: "west",
      "reconcile-interval": "30s",
    });
    const deployment = kube.stored(Resources.Deployment, { namespace: ns, name: "machina" }) as KubeObject & {
      spec: { template: { spec: { serviceAccountName: string; containers: { image: string }[] } } };
    };
    expect(deployment.spec.template.spec.containers[0]!.image).toBe(
      "registry.example.com/unbounded/machina:v0.1.24",
    );
    expect(deployment.spec.template.spec.serviceAccountName).toBe("machina");
    expect(kube.stored(Resources.ServiceAccount, { namespace: ns, name: "machina" })).toBeDefined();
  });

  it("the Site-less pass (singleton request) runs machina too; with no Sites it is retained, not deleted", async () => {
    kube.seed(siteResource, siteObject("west"));
    await pass("west");
    kube.calls.length = 0;
    await runPass(ctx, registry(), { request: { controller: "site", name: "__singletons" }, attempt: 0 });
    expect(kube.writes()).toBe(0);
  });
});

describe("metalman", () => {
  it("creates the metalman ServiceAccount its Deployment runs as", async () => {
    kube.seed(siteResource, siteObject("west"));
    await pass("west");
    const sa = kube.stored(Resources.ServiceAccount, { namespace: ns, name: "metalman" });
    expect(sa).toBeDefined();
    expect(sa?.metadata.ownerReferences).toBeUndefined();
    const deployment = kube.stored(Resources.Deployment, {
      namespace: ns,
      name: "metalman-west",
    }) as KubeObject & {
      spec: { template: { spec: { serviceAccountName: string } } };
    };
    expect(deployment.spec.template.spec.serviceAccountName).toBe("metalman");
  });
});

describe("manifests", () => {
  it("DefaultConfigMap extracts the named ConfigMap and retargets it to the operator namespace", () => {
    const cm = defaultConfigMap(operatorManifests(), machinaConfigName, "machina", "ops");
    expect(cm.metadata).toMatchObject({ name: machinaConfigName, namespace: "ops" });
    expect(cm.data["log-level"]).toBe("info");
    expect(() => defaultConfigMap(operatorManifests(), "nope", "machina", "ops")).toThrow(
      "machina manifests contain no ConfigMap nope",
    );
  });

  it("components skip CRDs: the bundle carries one and no pass ever applies it", async () => {
    expect(operatorManifests().some((o) => o.kind === "CustomResourceDefinition")).toBe(true);
    kube.seed(siteResource, siteObject("west"));
    await pass("west");
    expect(kube.calls.filter((c) => c.resource === "customresourcedefinitions")).toEqual([]);
    const env = createEnv(kube, { ...defaultEnvSettings, config });
    expect(
      await env.applyManifests(operatorManifests().filter((o) => o.kind === "CustomResourceDefinition")),
    ).toEqual([]);
  });
});

describe("Sites that fail the schema", () => {
  const invalid = (): KubeObject => ({ ...siteObject("broken"), spec: { components: "all of them" } });

  it("are reported on themselves (every component condition False/InvalidSpec) and fail permanently", async () => {
    kube.seed(siteResource, invalid());
    const result = await pass("broken");
    expect(result).toMatchObject({ result: "error", errorClass: "permanent", errorReason: "InvalidSpec" });
    expect(conditionsOf(kube.stored(siteResource, { name: "broken" }))).toEqual([
      ...["NetReady", "MachinaReady", "MetalmanReady", "StorageReady", "Ready"].map((type) => ({
        type,
        status: "False",
        reason: "InvalidSpec",
      })),
      // Nothing but an edit fixes it: kstatus reads Stalled=True as Failed.
      { type: "Stalled", status: "True", reason: "InvalidSpec" },
    ]);
  });

  it("are not dropped silently from cluster components: each listing logs and counts them", async () => {
    kube.seed(siteResource, siteObject("west"));
    kube.seed(siteResource, invalid());
    await pass("west");
    expect(recorded.logs).toContainEqual(
      expect.objectContaining({
        level: "warn",
        msg: "Site fails the schema; cluster components run without it",
      }),
    );
    expect(recorded.counts).toContainEqual({ name: "kubefn_site_invalid_total", labels: { site: "broken" } });
    expect(kube.stored(Resources.ConfigMap, { namespace: ns, name: "net-config" })?.data).toMatchObject({
      sites: "west",
    });
  });
});

describe("per-component predicates on the audit path", () => {
  const audit = (
    verb: string,
    resource: string,
    group: string,
    name: string,
    request?: unknown,
    response?: unknown,
  ) => ({
    level: "RequestResponse",
    stage: "ResponseComplete",
    verb,
    user: { username: "someone" },
    objectRef: { resource, namespace: ns, name, apiGroup: group, apiVersion: "v1" },
    responseStatus: { code: 200 },
    ...(request === undefined ? {} : { requestObject: request }),
    ...(response === undefined ? {} : { responseObject: response }),
  });
  const owned = (kind: string, name: string, generation = 1, rv = "5") => ({
    apiVersion: kind === "Deployment" ? "apps/v1" : "v1",
    kind,
    metadata: {
      name,
      namespace: ns,
      generation,
      resourceVersion: rv,
      ownerReferences: [
        {
          apiVersion: "unbounded-cloud.io/v1alpha3",
          kind: "Site",
          name: "west",
          uid: "uid-west",
          controller: true,
        },
      ],
    },
  });
  const map = async (...items: unknown[]) =>
    (await mapEvents(ctx, registry(), { kind: "EventList", apiVersion: "audit.k8s.io/v1", items })).requests;

  it("ManagedWorkload: a machina Deployment scale-status update maps to nothing; a generation change re-runs the singleton", async () => {
    const before = {
      ...owned("Deployment", "machina", 3, "10"),
      metadata: { ...owned("Deployment", "machina", 3, "10").metadata, ownerReferences: [] },
    };
    const after = { ...before, metadata: { ...before.metadata, resourceVersion: "11" } };
    expect(await map(audit("update", "deployments", "apps", "machina", before, after))).toEqual([]);
    const bumped = { ...after, metadata: { ...after.metadata, generation: 4 } };
    expect(await map(audit("update", "deployments", "apps", "machina", before, bumped))).toEqual([
      { controller: "site", name: "__singletons" },
    ]);
  });

  it("ManagedConfig: a label-only patch of machina-config maps to nothing; a data patch re-runs everything", async () => {
    kube.seed(siteResource, siteObject("west"));
    expect(
      await map(audit("patch", "configmaps", "", machinaConfigName, { metadata: { labels: { a: "b" } } })),
    ).toEqual([]);
    expect(
      await map(audit("patch", "configmaps", "", machinaConfigName, { data: { "log-level": "debug" } })),
    ).toEqual([
      { controller: "site", name: "__singletons" },
      { controller: "site", name: "west" },
    ]);
  });

  it("OwnedWorkload: status churn of a Site's metalman Deployment re-runs nothing; a spec edit re-runs its Site", async () => {
    const before = owned("Deployment", "metalman-west", 2, "20");
    const statusOnly = owned("Deployment", "metalman-west", 2, "21");
    expect(await map(audit("update", "deployments", "apps", "metalman-west", before, statusOnly))).toEqual(
      [],
    );
    const edited = owned("Deployment", "metalman-west", 3, "22");
    expect(
      await map(audit("patch", "deployments", "apps", "metalman-west", { spec: { replicas: 0 } }, edited)),
    ).toEqual([{ controller: "site", name: "west" }]);
  });
});

describe("a Site whose component errors are all permanent-class", () => {
  it("backs off (a delayed follow-up) rather than waiting for the resync", async () => {
    const forbidden = new ForbiddenError('deployments.apps "metalman-west" is forbidden', {
      status: 403,
      reason: "Forbidden",
    });
    const registryOf = () =>
      createRegistry([
        siteController({
          registry: {
            cluster: [
              {
                name: "net",
                conditionType: "NetReady",
                reconcile: async () => failedResult(forbidden),
              },
            ],
            site: [],
          },
          env: { config },
        }),
      ]);
    kube.seed(siteResource, siteObject("west"));
    const first = await runPass(ctx, registryOf(), {
      request: { controller: "site", name: "west" },
      attempt: 0,
    });
    expect(first).toMatchObject({ result: "error", errorClass: "transient", errorReason: "Forbidden" });
    expect(first.followUpSeconds).toBeGreaterThan(0);
    const later = await runPass(ctx, registryOf(), {
      request: { controller: "site", name: "west" },
      attempt: 3,
    });
    expect(later.followUpSeconds).toBeGreaterThan(first.followUpSeconds!);
    expect(conditionsOf(kube.stored(siteResource, { name: "west" }))).toEqual([
      { type: "NetReady", status: "False", reason: "ReconcileError" },
      { type: "Ready", status: "False", reason: "ReconcileError" },
    ]);
  });
});
