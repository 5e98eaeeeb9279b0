/**
 * The Site controller against the real control plane: `runPass` with the sample registry (net,
 * metalman, storage) as kubefn's ServiceAccount (its RBAC and admission policies from infra/). The
 * devcluster runs the garbage collector, so a deleted Site's per-Site objects go through their
 * ownerReferences.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { defaultSiteRegistry, netConfigName } from "../../shared/controllers/site/components/index.ts";
import { siteController } from "../../shared/controllers/site/controller.ts";
import {
  type Condition,
  type CountingTransport,
  countingTransport,
  createKube,
  InvalidError,
  isNotFound,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import {
  type Context,
  createRegistry,
  mapEvents,
  type Registry,
  runPass,
} from "../../shared/runtime/index.ts";
import { type AuditEvent, auditEventsSince, eventually, kubeConfig, kubectl } from "../setup/cluster.ts";
import { passContext } from "../support/pass-context.ts";

const ns = "kubefn-system";
const siteName = `site-it-${randomBytes(3).toString("hex")}`;
/** A second Site that stays, so net has Sites left when the first one goes. */
const siblingName = `${siteName}-b`;
const config = {
  imageRegistry: "ghcr.io/unbounded",
  imageTag: "v0.1.24",
  apiServerEndpoint: "https://10.0.0.1:6443",
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let transport: CountingTransport;
let kube: Kube;
let registry: Registry;
let ctx: Context;
let siteUid = "";

const pass = (name: string) => runPass(ctx, registry, { request: { controller: "site", name }, attempt: 0 });
const getSite = () => kube.get(siteResource, { name: siteName });
const conditionsOf = (obj: KubeObject) =>
  (obj.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];
const getOrUndefined = async (res: (typeof Resources)[keyof typeof Resources], name: string) => {
  try {
    return await kube.get(res, { namespace: ns, name });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
};

beforeAll(async () => {
  kube = createKube(createNodeTransport(kubeConfig()));
  await installCrdsAndRbac(kube);
  // The passes run as kubefn's ServiceAccount: its RBAC and admission policies admit their writes.
  const token = await serviceAccountToken(createNodeTransport(kubeConfig()), "kubefn-system", "kubefn");
  transport = countingTransport(createNodeTransport(asServiceAccount(kubeConfig(), token)));
  registry = createRegistry([siteController({ registry: defaultSiteRegistry(), env: { config } })]);
  ctx = passContext(createKube(transport));
  for (let attempt = 0; ; attempt++) {
    try {
      const created = await kube.create(siteResource, {
        apiVersion: "unbounded-cloud.io/v1alpha3",
        kind: "Site",
        metadata: { name: siteName },
        spec: { displayName: "integration" },
      });
      siteUid = created.metadata.uid!;
      await kube.create(siteResource, {
        apiVersion: "unbounded-cloud.io/v1alpha3",
        kind: "Site",
        metadata: { name: siblingName },
        spec: { components: { metalman: { enabled: false } } },
      });
      break;
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
}, 120_000);

afterAll(async () => {
  await kube?.delete(siteResource, { name: siteName }).catch(() => undefined);
  await kube?.delete(siteResource, { name: siblingName }).catch(() => undefined);
});

describe("Site controller on the devcluster", () => {
  it("publishes NetReady, MachinaReady, MetalmanReady, StorageReady in registry order", async () => {
    // The first pass applies the Deployments: applied is not running, and the pass says so and
    // comes back within seconds to look again.
    const first = await pass(siteName);
    expect(first).toMatchObject({ result: "requeue", absent: false, wroteStatus: true });
    const applied = await getSite();
    expect(conditionsOf(applied).map((c) => [c.type, c.status, c.reason])).toEqual([
      ["NetReady", "True", "Reconciled"],
      ["MachinaReady", "False", "DeploymentProgressing"],
      ["MetalmanReady", "False", "DeploymentProgressing"],
      ["StorageReady", "True", "Reconciled"],
      ["Ready", "False", "DeploymentProgressing"],
      ["Reconciling", "True", "DeploymentProgressing"],
    ]);
    // The cluster's Deployment controller and its node roll them out; a later pass sees them run.
    await eventually(
      async () => {
        const result = await pass(siteName);
        return result.result === "done" ? result : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1000, what: "machina and metalman available" },
    );
    const site = await getSite();
    expect(conditionsOf(site).map((c) => [c.type, c.status, c.reason])).toEqual([
      ["NetReady", "True", "Reconciled"],
      ["MachinaReady", "True", "Reconciled"],
      ["MetalmanReady", "True", "Reconciled"],
      ["StorageReady", "True", "Reconciled"],
      ["Ready", "True", "Reconciled"],
    ]);
    expect((site.status as { observedGeneration?: number }).observedGeneration).toBe(
      site.metadata.generation,
    );
  });

  it("machina publishes MachinaReady with the API server endpoint in its config; metalman's ServiceAccount exists", async () => {
    const machinaConfig = await kube.get(Resources.ConfigMap, { namespace: ns, name: "machina-config" });
    expect(machinaConfig.data).toMatchObject({ "apiserver-endpoint": config.apiServerEndpoint });
    const machina = await kube.get<
      KubeObject & { spec: { template: { spec: { containers: { image: string }[] } } } }
    >(Resources.Deployment, { namespace: ns, name: "machina" });
    expect(machina.spec.template.spec.containers[0]!.image).toBe("ghcr.io/unbounded/machina:v0.1.24");
    // The bundle carries a CRD (machines.unbounded-cloud.io): the installer put it in place with
    // kubefn's own CRDs (infra/crds), and no component applies it (kubefn may not write CRDs).
    const machines = await kube.get(Resources.CustomResourceDefinition, {
      name: "machines.unbounded-cloud.io",
    });
    expect(
      machines.metadata.managedFields?.some(
        (f) => (f as { manager?: string }).manager === "unbounded-operator",
      ),
    ).toBe(false);
    // The ServiceAccount the metalman Deployment runs as: without it its Pods are refused.
    const sa = await kube.get(Resources.ServiceAccount, { namespace: ns, name: "metalman" });
    expect(
      sa.metadata.managedFields?.some((f) => (f as { manager?: string }).manager === "unbounded-operator"),
    ).toBe(true);
  });

  it("per-Site objects carry a controller ownerReference and are applied by unbounded-operator", async () => {
    const perSite = [
      await kube.get(Resources.Deployment, { namespace: ns, name: `metalman-${siteName}` }),
      await kube.get(Resources.ConfigMap, { namespace: ns, name: `metalman-${siteName}` }),
      await kube.get(Resources.ConfigMap, { namespace: ns, name: `storage-${siteName}` }),
    ];
    for (const obj of perSite) {
      expect(obj.metadata.ownerReferences).toEqual([
        {
          apiVersion: "unbounded-cloud.io/v1alpha3",
          kind: "Site",
          name: siteName,
          uid: siteUid,
          controller: true,
        },
      ]);
    }
    const cluster = [
      await kube.get(Resources.ConfigMap, { namespace: ns, name: netConfigName }),
      await kube.get(Resources.ServiceAccount, { namespace: ns, name: "net" }),
    ];
    for (const obj of [...perSite, ...cluster]) {
      const managers = (obj.metadata.managedFields as { manager: string; operation: string }[]).map(
        (m) => `${m.manager}/${m.operation}`,
      );
      expect(managers).toContain("unbounded-operator/Apply");
    }
    const deployment = perSite[0]!;
    const podSpec = (deployment.spec as { template: { spec: Record<string, unknown> } }).template.spec;
    expect(JSON.stringify(podSpec.affinity)).toContain("net.unbounded-cloud.io/site");
    expect(JSON.stringify(podSpec.containers)).toContain("ghcr.io/unbounded/metalman:v0.1.24");
    expect((cluster[0]!.data as Record<string, string>).sites?.split(",")).toContain(siteName);
  });

  it("a second pass on the converged Site makes zero writes", async () => {
    transport.reset();
    const result = await pass(siteName);
    expect(result).toMatchObject({ result: "done", wroteStatus: false });
    const counts = transport.counts();
    expect(transport.calls().filter((c) => c.method !== "GET")).toEqual([]);
    expect(counts.writes).toBe(0);
    // Reads: the Site, the Site list, net's 2 objects, machina's 3, metalman's ServiceAccount,
    // override and 2 objects, storage's 1.
    expect(counts.reads).toBeLessThanOrEqual(12);
    console.info(`steady-state Site pass: ${counts.reads} reads, ${counts.writes} writes`);
  });

  it("the singleton request re-applies net-config after it is deleted, and only cluster state", async () => {
    await kube.delete(Resources.ConfigMap, { namespace: ns, name: netConfigName });
    const result = await pass("__singletons");
    expect(result).toMatchObject({ result: "done", absent: true, wroteStatus: false });
    const cm = await kube.get(Resources.ConfigMap, { namespace: ns, name: netConfigName });
    expect((cm.data as Record<string, string>).sites?.split(",")).toContain(siteName);
    transport.reset();
    await pass("__singletons");
    expect(transport.counts().writes).toBe(0);
  });

  it("disabling storage deletes its ConfigMap and sets Disabled; the next pass writes nothing", async () => {
    await kube.patch(
      siteResource,
      { name: siteName },
      { type: "merge", body: { spec: { components: { storage: { enabled: false } } } } },
    );
    await pass(siteName);
    expect(await getOrUndefined(Resources.ConfigMap, `storage-${siteName}`)).toBeUndefined();
    const storage = conditionsOf(await getSite()).find((c) => c.type === "StorageReady");
    expect(storage).toMatchObject({ status: "True", reason: "Disabled" });
    transport.reset();
    await pass(siteName);
    expect(transport.counts().writes).toBe(0);
  });

  it("ManagedConfigPredicate on the audit path: an override's label- and annotation-only patches trigger no pass; its data does", async () => {
    const override = `metalman-config-${siteName}`;
    const since = (await auditEventsSince()).next;
    const started = Date.now() - 1;
    const k = (...args: string[]) => kubectl(["-n", ns, ...args]);
    expect((await k("create", "configmap", override, "--from-literal=pxe-boot=http")).code).toBe(0);
    try {
      expect((await k("label", "configmap", override, "team=metal")).code).toBe(0);
      expect((await k("annotate", "configmap", override, "note=seen")).code).toBe(0);
      // A PUT of the object as read with only a label changed: the payload is the same.
      const current = JSON.parse((await k("get", "configmap", override, "-o", "json")).stdout) as KubeObject;
      current.metadata.labels = { ...current.metadata.labels, tier: "gold" };
      expect((await kubectl(["replace", "-f", "-"], JSON.stringify(current))).code).toBe(0);
      expect(
        (await k("patch", "configmap", override, "--type=merge", "-p", '{"data":{"pxe-boot":"ipxe"}}')).code,
      ).toBe(0);
      const ours = (e: AuditEvent) =>
        e.stage === "ResponseComplete" &&
        e.objectRef?.resource === "configmaps" &&
        e.objectRef.name === override &&
        Date.parse((e as { requestReceivedTimestamp?: string }).requestReceivedTimestamp ?? "") >= started;
      const events = await eventually(
        async () => {
          const got = (await auditEventsSince(since)).events.filter(ours);
          return got.length >= 5 ? got : undefined;
        },
        { what: "the override's five writes in the audit stream", timeoutMs: 20_000 },
      );
      const requestsOf = async (e: AuditEvent) =>
        (await mapEvents(ctx, registry, { kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [e] }))
          .requests;
      const [create, label, annotate, replace, data] = events;
      // The shipped audit policy logs kubefn-system's ConfigMaps with bodies (kubefn's own
      // configs, no credentials): without them the predicate cannot tell a label from the data.
      expect(label!.level).toBe("RequestResponse");
      expect(replace!.verb).toBe("update");
      const site = [{ controller: "site", name: siteName }];
      expect({
        create: await requestsOf(create!),
        label: await requestsOf(label!),
        annotate: await requestsOf(annotate!),
        // A PUT carries the payload after the write, never the one before: it passes (the seed's
        // informer holds both), which costs one pass and never misses a data change.
        replace: await requestsOf(replace!),
        data: await requestsOf(data!),
      }).toEqual({ create: site, label: [], annotate: [], replace: site, data: site });
    } finally {
      await k("delete", "configmap", override, "--ignore-not-found");
    }
  });

  it("deleting the Site lets the garbage collector remove its Deployment and ConfigMap", async () => {
    expect(await getOrUndefined(Resources.Deployment, `metalman-${siteName}`)).toBeDefined();
    await kube.delete(siteResource, { name: siteName });
    await eventually(
      async () => {
        try {
          await getSite();
          return undefined;
        } catch (err) {
          return isNotFound(err) ? true : undefined;
        }
      },
      { what: "the Site to be gone" },
    );
    const result = await pass(siteName);
    // machina's config lists the Sites left, so its Deployment rolls again: the Site-less pass
    // looks again while it rolls out (each remaining Site is re-run by the config's watch).
    expect(result).toMatchObject({ absent: true });
    expect(["done", "requeue"]).toContain(result.result);
    await eventually(
      async () =>
        (await getOrUndefined(Resources.Deployment, `metalman-${siteName}`)) === undefined &&
        (await getOrUndefined(Resources.ConfigMap, `metalman-${siteName}`)) === undefined
          ? true
          : undefined,
      { timeoutMs: 60_000, intervalMs: 250, what: "the garbage collector to remove metalman's objects" },
    );
    // The absent pass ran net with the Sites left: the sibling stays listed, the deleted one goes.
    const cm = await kube.get(Resources.ConfigMap, { namespace: ns, name: netConfigName });
    const listed = (cm.data as Record<string, string>).sites?.split(",");
    expect(listed).toContain(siblingName);
    expect(listed).not.toContain(siteName);
  });
});

describe("a Site's name is not a pointer to another Site's objects", () => {
  it("a Site named config-<site> is refused: its metalman config would be metalman-config-<site>, that Site's override", async () => {
    const override = `metalman-config-${siblingName}`;
    const squatter = `config-${siblingName}`;
    await kube.create(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: override, namespace: ns, labels: { "unbounded-cloud.io/site": siblingName } },
      data: { "dhcp-enabled": "false" },
    });
    try {
      const taken = await kube
        .create(siteResource, {
          apiVersion: "unbounded-cloud.io/v1alpha3",
          kind: "Site",
          metadata: { name: squatter },
          spec: {},
        })
        .catch((err: unknown) => err);
      // Whatever the API server took, a pass acts on.
      if (!(taken instanceof Error)) await pass(squatter);
      const after = await kube.get(Resources.ConfigMap, { namespace: ns, name: override });
      expect(after.data).toEqual({ "dhcp-enabled": "false" });
      expect(after.metadata.ownerReferences ?? []).toEqual([]);
      expect(taken).toBeInstanceOf(InvalidError);
      expect((taken as Error).message).toContain("may not start with config-");
    } finally {
      await kube.delete(siteResource, { name: squatter }).catch(() => undefined);
      await kube.delete(Resources.ConfigMap, { namespace: ns, name: override }).catch(() => undefined);
    }
  });
});
