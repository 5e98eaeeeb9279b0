/**
 * The SubPool controller against the real control plane: `runPass` driven directly as kubefn's
 * ServiceAccount (its RBAC and admission policies from infra/). The devcluster runs the StatefulSet controller (and binds the volume claim), but no
 * shared proxy gateway exists here, so readiness moves from StatefulSetNotReady to
 * ProxyGatewayNotReady and stays False (examples.test.ts covers a pool that becomes Ready).
 */
import { beforeAll, describe, expect, inject, it } from "vitest";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import {
  type SubPool,
  subPoolFinalizer,
  subPoolManagedLabel,
  subPoolNamespaceName,
  subPoolPoolLabel,
  subPoolResource,
} from "../../shared/controllers/subpool/api.ts";
import { subPoolController } from "../../shared/controllers/subpool/controller.ts";
import {
  type CountingTransport,
  countingTransport,
  createKube,
  isNotFound,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import {
  type Context,
  createRegistry,
  type PassMessage,
  type Registry,
  runPass,
} from "../../shared/runtime/index.ts";
import { eventually } from "../setup/cluster.ts";
import { passContext } from "../support/pass-context.ts";

const suffix = Math.random().toString(36).slice(2, 7);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let transport: CountingTransport;
let kube: Kube;
let registry: Registry;
let ctx: Context;

type SubPoolObject = SubPool & KubeObject;
const message = (name: string): PassMessage => ({ request: { controller: "subpool", name }, attempt: 0 });
const pass = (name: string) => runPass(ctx, registry, message(name));
const getPool = (name: string) => kube.get<SubPoolObject>(subPoolResource, { name });
const maybe = async <T>(read: Promise<T>): Promise<T | undefined> => {
  try {
    return await read;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
};
const conditionOf = (p: SubPoolObject, type: string) => p.status?.conditions?.find((c) => c.type === type);

function spec(cpu = "500m"): Record<string, unknown> {
  return {
    exposure: { mode: "Internal" },
    storage: { size: "1Gi" },
    cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu, memory: "256Mi" } } },
    cpaManager: {
      image: "ghcr.io/subrelay/cpa-manager:1.4.0",
      resources: { requests: { cpu: "250m", memory: "128Mi" } },
    },
  };
}

async function createPool(name: string, body: Record<string, unknown>): Promise<SubPoolObject> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await kube.create(subPoolResource, {
        apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
        kind: "SubPool",
        metadata: { name },
        spec: body,
      });
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
}

/** Deletes the SubPool and drives passes until it is gone; returns what each pass saw. */
async function deleteAndDrive(name: string): Promise<{ namespaceSeenWhileBlocked: boolean }> {
  await kube.delete(subPoolResource, { name });
  let namespaceSeenWhileBlocked = false;
  await eventually(
    async () => {
      await pass(name);
      const pool = await maybe(getPool(name));
      const namespace = await maybe(kube.get(Resources.Namespace, { name: subPoolNamespaceName(name) }));
      if (pool && namespace && conditionOf(pool, "Ready")?.reason === "DeletionBlocked") {
        expect(pool.metadata.finalizers).toContain(subPoolFinalizer);
        namespaceSeenWhileBlocked = true;
      }
      await sleep(200);
      return pool ? undefined : true;
    },
    { timeoutMs: 90_000, intervalMs: 0, what: `SubPool ${name} to disappear` },
  );
  return { namespaceSeenWhileBlocked };
}

beforeAll(async () => {
  const kc = loadKubeConfig({ file: inject("kubeconfig") });
  kube = createKube(createNodeTransport(kc));
  await installCrdsAndRbac(kube);
  // The passes run as kubefn's ServiceAccount: its RBAC and admission policies admit their writes.
  const token = await serviceAccountToken(createNodeTransport(kc), "kubefn-system", "kubefn");
  transport = countingTransport(createNodeTransport(asServiceAccount(kc, token)));
  registry = createRegistry([subPoolController()]);
  ctx = passContext(createKube(transport));
}, 120_000);

describe("SubPool controller on the devcluster", () => {
  const name = `sp-it-${suffix}`;
  const namespace = subPoolNamespaceName(name);
  const owned: [Resource, string][] = [
    [Resources.Secret, `${name}-credentials`],
    [Resources.ServiceAccount, name],
    [Resources.ConfigMap, `${name}-config`],
    [Resources.ResourceQuota, `${name}-quota`],
    [Resources.NetworkPolicy, name],
    [Resources.Service, `${name}-cpa`],
    [Resources.StatefulSet, `${name}-cpa-manager`],
    [Resources.PodDisruptionBudget, name],
  ];

  it("creates the Namespace and every owned object with a controller reference", async () => {
    const created = await createPool(name, spec());
    transport.reset();
    const result = await pass(name);
    // Waiting for its StatefulSet's Pod: the StatefulSet's status writes bring a look as they
    // happen (issue 33); its own look is the fallback, 15 s on.
    expect(result).toMatchObject({ result: "requeue", followUpSeconds: 15, wroteStatus: true });
    // Create first, never a GET that 404s before a create: the first pass costs the pool's
    // objects' creates (9), kubefn's RoleBinding of kubefn-subpool-objects there (1), the finalizer
    // and the status (2), and 2 reads (the pool, the proxy gateway's EndpointSlices) — 14 in all,
    // against the controller-runtime peer's 11 (its reads come from its informer cache). Reading
    // before each create cost 26. A create in the Namespace the authorizer refuses until it has taken the
    // new RoleBinding in (403) is tried again within the pass, and counted apart.
    // Events are counted apart: the one this pass records says why the pool is not Ready (no
    // proxy gateway runs in this cluster; a StatefulSet still starting is progress, no Event).
    const events = transport.calls().filter((c) => c.path.startsWith("/apis/events.k8s.io/"));
    expect(events.map((c) => `${c.method} ${c.status}`)).toEqual(["POST 201"]);
    const calls = transport
      .calls()
      .filter((c) => !events.includes(c))
      .map((c) => `${c.method} ${c.status}`)
      .filter((c) => c !== "POST 403");
    expect(
      calls.filter((c) => c.startsWith("POST")),
      calls.join(", "),
    ).toHaveLength(10);
    expect(
      calls.filter((c) => c.endsWith(" 404")),
      calls.join(", "),
    ).toEqual([]);
    expect(calls.length, calls.join(", ")).toBeLessThanOrEqual(14);

    const ref = {
      apiVersion: "subrelay.example.com/v1alpha1",
      kind: "SubPool",
      name,
      uid: created.metadata.uid,
      controller: true,
    };
    const ns = await kube.get(Resources.Namespace, { name: namespace });
    expect(ns.metadata.ownerReferences).toEqual([ref]);
    expect(ns.metadata.labels).toMatchObject({
      [subPoolManagedLabel]: "subpool-operator",
      [subPoolPoolLabel]: name,
    });
    for (const [res, objectName] of owned) {
      const object = await kube.get(res, { namespace, name: objectName });
      expect(object.metadata.ownerReferences, `${res.kind} ${objectName}`).toEqual([ref]);
    }
    const svc = await kube.get<KubeObject & { spec: { clusterIP?: string } }>(Resources.Service, {
      namespace,
      name: `${name}-cpa`,
    });
    expect(svc.spec.clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

    const pool = await getPool(name);
    expect(pool.metadata.finalizers).toEqual([subPoolFinalizer]);
    expect(pool.status).toMatchObject({
      observedGeneration: 1,
      namespace,
      cpaService: `${name}-cpa.${namespace}.svc:8080`,
    });
    // The pass that created the StatefulSet saw it with no ready replica yet: False, and why.
    expect(conditionOf(pool, "Ready")).toMatchObject({
      status: "False",
      reason: "StatefulSetNotReady",
      message: "StatefulSet has 0/1 ready replicas",
    });
    expect(conditionOf(pool, "ProxyGatewayReady")).toMatchObject({
      status: "False",
      reason: "ProxyGatewayNotReady",
    });
    expect(conditionOf(pool, "Suspended")).toMatchObject({ status: "False", reason: "Active" });
  });

  it("a second pass over the converged pool makes zero writes", async () => {
    // The StatefulSet controller brings its Pod up (the volume claim bound first); the next pass
    // sees it and moves Ready on to the proxy gateway, which this cluster does not run.
    await eventually(
      async () => {
        const sts = await kube.get<KubeObject & { status?: { readyReplicas?: number } }>(
          Resources.StatefulSet,
          {
            namespace,
            name: `${name}-cpa-manager`,
          },
        );
        return sts.status?.readyReplicas === 1 ? true : undefined;
      },
      { timeoutMs: 60_000, what: "the StatefulSet's Pod ready" },
    );
    await pass(name);
    expect(conditionOf(await getPool(name), "Ready")).toMatchObject({
      status: "False",
      reason: "ProxyGatewayNotReady",
    });
    transport.reset();
    const result = await pass(name);
    // Still waiting for the proxy gateway: a look of its own (bounded), and nothing written.
    expect(result).toMatchObject({ result: "requeue", wroteStatus: false });
    expect(transport.calls().filter((c) => c.method !== "GET")).toEqual([]);
    expect(transport.counts().writes).toBe(0);
  });

  it("suspend scales to zero and keeps the Namespace and Secret; resume scales back", async () => {
    await kube.patch(subPoolResource, { name }, { type: "merge", body: { spec: { suspend: true } } });
    expect(await pass(name)).toMatchObject({ result: "done" });
    const sts = await kube.get<KubeObject & { spec: { replicas: number } }>(Resources.StatefulSet, {
      namespace,
      name: `${name}-cpa-manager`,
    });
    expect(sts.spec.replicas).toBe(0);
    await kube.get(Resources.Secret, { namespace, name: `${name}-credentials` });
    const pool = await getPool(name);
    expect(conditionOf(pool, "Suspended")).toMatchObject({ status: "True", observedGeneration: 2 });
    expect(conditionOf(pool, "ProxyGatewayReady")).toMatchObject({ status: "Unknown", reason: "Suspended" });
    // A suspend is what its owner asked for: recorded, but not as a Warning (Ready=False/Suspended).
    const suspendEvents = (
      await kube.list<KubeObject & { type?: string; reason?: string; note?: string }>(Resources.Event, {
        namespace: "default",
        fieldSelector: `regarding.name=${name}`,
      })
    ).items.filter((e) => e.reason === "Suspended");
    expect(suspendEvents.map((e) => e.note?.split(":")[0]).sort()).toContain("Ready=False");
    expect(suspendEvents.filter((e) => e.type === "Warning").map((e) => e.note)).toEqual([]);

    await kube.patch(subPoolResource, { name }, { type: "merge", body: { spec: { suspend: false } } });
    await pass(name);
    const resumed = await kube.get<KubeObject & { spec: { replicas: number } }>(Resources.StatefulSet, {
      namespace,
      name: `${name}-cpa-manager`,
    });
    expect(resumed.spec.replicas).toBe(1);
  });

  it("deleting the SubPool deletes its Namespace, and only then drops the finalizer", async () => {
    const { namespaceSeenWhileBlocked } = await deleteAndDrive(name);
    expect(namespaceSeenWhileBlocked).toBe(true);
    expect(await maybe(kube.get(Resources.Namespace, { name: namespace }))).toBeUndefined();
  });
});

describe("SubPool conflicts and validation on the devcluster", () => {
  it("a Namespace that already exists unowned gives NamespaceConflict and is left untouched", async () => {
    const name = `sp-taken-${suffix}`;
    const namespace = subPoolNamespaceName(name);
    const foreign = await kube.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace, labels: { team: "someone-else" } },
    });
    await createPool(name, spec());
    const result = await pass(name);
    expect(result).toMatchObject({ result: "awaitSweep" });
    expect(result.followUpSeconds).toBeUndefined();
    const pool = await getPool(name);
    expect(conditionOf(pool, "Ready")).toMatchObject({ status: "False", reason: "NamespaceConflict" });

    const after = await kube.get(Resources.Namespace, { name: namespace });
    expect(after.metadata.resourceVersion).toBe(foreign.metadata.resourceVersion);
    expect(after.metadata.ownerReferences).toBeUndefined();
    expect(
      await maybe(kube.get(Resources.Secret, { namespace, name: `${name}-credentials` })),
    ).toBeUndefined();

    // Deleting the pool keeps the foreign Namespace: only the finalizer goes.
    await deleteAndDrive(name);
    const kept = await kube.get(Resources.Namespace, { name: namespace });
    expect(kept.metadata.deletionTimestamp).toBeUndefined();
    await kube.delete(Resources.Namespace, { name: namespace });
  });

  it("a SubPool over the resource envelope gets ResourceEnvelopeExceeded and nothing is created", async () => {
    const name = `sp-big-${suffix}`;
    await createPool(name, spec("3"));
    transport.reset();
    const result = await pass(name);
    expect(result).toMatchObject({
      result: "error",
      errorClass: "permanent",
      errorReason: "ResourceEnvelopeExceeded",
    });
    expect(result.followUpSeconds).toBeUndefined();
    // Nothing is created but the Event that says why.
    const posts = transport.calls().filter((c) => c.method === "POST");
    expect(posts.map((c) => c.path.split("?")[0])).toEqual([
      "/apis/events.k8s.io/v1/namespaces/default/events",
    ]);
    expect(await maybe(kube.get(Resources.Namespace, { name: subPoolNamespaceName(name) }))).toBeUndefined();
    const pool = await getPool(name);
    expect(conditionOf(pool, "Ready")).toMatchObject({
      status: "False",
      reason: "ResourceEnvelopeExceeded",
      observedGeneration: 1,
    });
    expect(conditionOf(pool, "Ready")?.message).toMatch(
      /cpu requests \(3 \+ 250m\) exceed the platform envelope of 2/,
    );

    transport.reset();
    await pass(name);
    expect(transport.counts().writes).toBe(0);
    await deleteAndDrive(name);
  });
});

describe("the seed's operator configuration on the devcluster", () => {
  it("InvalidOperatorConfig: a bad SUBPOOL_* setting stops SubPools only, each says so on Ready, and nothing is created", async () => {
    const name = `sp-badcfg-${suffix}`;
    await createPool(name, spec());
    const invalid = createRegistry([
      subPoolController({ operatorConfig: { invalid: "SUBPOOL_MAX_CPU: not a quantity" } }),
    ]);
    transport.reset();
    const result = await runPass(ctx, invalid, message(name));
    expect(result).toMatchObject({
      result: "error",
      errorClass: "permanent",
      errorReason: "InvalidOperatorConfig",
    });
    expect(result.followUpSeconds).toBeUndefined();
    const posts = transport.calls().filter((c) => c.method === "POST");
    expect(posts.map((c) => c.path.split("?")[0])).toEqual([
      "/apis/events.k8s.io/v1/namespaces/default/events",
    ]);
    expect(await maybe(kube.get(Resources.Namespace, { name: subPoolNamespaceName(name) }))).toBeUndefined();
    const pool = await getPool(name);
    expect(conditionOf(pool, "Ready")).toMatchObject({ status: "False", reason: "InvalidOperatorConfig" });
    expect(conditionOf(pool, "Ready")?.message).toMatch(/SUBPOOL_MAX_CPU: not a quantity/);
    // Once fixed, the same pool converges with the valid configuration.
    await pass(name);
    expect(conditionOf(await getPool(name), "Ready")?.reason).not.toBe("InvalidOperatorConfig");
    await deleteAndDrive(name);
  });
});
