/**
 * The proxy controller against the real control plane: `runPass` driven directly (no functions
 * layer), the Kubernetes pod provider, the devcluster's simulated node (Pods Running at 127.1.x.y).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parse } from "yaml";
import {
  type Proxy as ProxyObject,
  proxyResource,
  proxySpecHashAnnotation,
} from "../../shared/controllers/proxy/api.ts";
import { proxyController } from "../../shared/controllers/proxy/controller.ts";
import { createKubernetesProvider } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import { nameFromUID, ownerTagKey } from "../../shared/controllers/proxy/providers/provider.ts";
import {
  type CountingTransport,
  countingTransport,
  createKube,
  isAlreadyExists,
  isNotFound,
  type Kube,
  type KubeObject,
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
import { passContext } from "../support/pass-context.ts";

declare module "vitest" {
  // biome-ignore lint/suspicious/noExportsInTest: augments vitest's ProvidedContext (test/setup provides it).
  export interface ProvidedContext {
    kubeconfig: string;
  }
}

const crdResource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  resource: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
} as const;
const namespace = `proxy-it-${Math.random().toString(36).slice(2, 8)}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let transport: CountingTransport;
let kube: Kube;
let registry: Registry;
let ctx: Context;

const message = (name: string): PassMessage => ({
  request: { controller: "proxy", namespace, name },
  attempt: 0,
});
const getProxy = (name: string) => kube.get<ProxyObject & KubeObject>(proxyResource, { namespace, name });
const podsOf = async (uid: string) =>
  (await kube.list(Resources.Pod, { namespace, labelSelector: `${ownerTagKey}=${uid}` })).items;
const conditionOf = (p: ProxyObject, type: string) => p.status?.conditions?.find((c) => c.type === type);

/** Runs passes for `name` until `done(proxy)` holds; returns the phases seen after each pass. */
async function drive(
  name: string,
  done: (p: (ProxyObject & KubeObject) | undefined) => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<string[]> {
  const phases: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await runPass(ctx, registry, message(name));
    const p = await getProxy(name).catch((err) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
    const phase = p?.status?.phase;
    if (phase && phases.at(-1) !== phase) phases.push(phase);
    if (await done(p)) return phases;
    if (Date.now() > deadline) throw new Error(`${name} did not converge: ${JSON.stringify(p?.status)}`);
    await sleep(150);
  }
}

async function createProxy(name: string, spec: Record<string, unknown>): Promise<ProxyObject & KubeObject> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await kube.create(proxyResource, {
        apiVersion: `${proxyResource.group}/${proxyResource.version}`,
        kind: "Proxy",
        metadata: { name, namespace },
        spec,
      });
    } catch (err) {
      // A freshly Established CRD can answer 404 for a moment while its handler is installed.
      if (!isNotFound(err) || attempt > 50) throw err;
      await sleep(200);
    }
  }
}

async function putSecret(name: string, userData: string): Promise<void> {
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace },
    stringData: { "user-data": userData },
  };
  try {
    await kube.create(Resources.Secret, body);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
    await kube.patch(
      Resources.Secret,
      { namespace, name },
      { type: "merge", body: { stringData: { "user-data": userData } } },
    );
  }
}

beforeAll(async () => {
  const kc = loadKubeConfig({ file: inject("kubeconfig") });
  transport = countingTransport(createNodeTransport(kc));
  kube = createKube(transport);
  const dir = join(import.meta.dirname, "../../infra/crds");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
    const crd = parse(readFileSync(join(dir, file), "utf8")) as KubeObject;
    try {
      await kube.create(crdResource, crd);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const current = await kube.get(crdResource, { name: crd.metadata.name! });
      await kube.update(crdResource, {
        ...crd,
        metadata: { ...crd.metadata, resourceVersion: current.metadata.resourceVersion },
      });
    }
  }
  for (const deadline = Date.now() + 30_000; ; ) {
    const crd = await kube.get(crdResource, { name: `${proxyResource.resource}.${proxyResource.group}` });
    const conditions = (crd.status as { conditions?: { type: string; status: string }[] } | undefined)
      ?.conditions;
    if (conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
    if (Date.now() > deadline) throw new Error("the Proxy CRD is not Established");
    await sleep(200);
  }
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });

  const provider = createKubernetesProvider({ kube });
  registry = createRegistry([proxyController({ providers: { kubernetes: provider } })]);
  ctx = passContext(kube);
}, 120_000);

afterAll(async () => {
  await kube?.delete(Resources.Namespace, { name: namespace }).catch(() => undefined);
});

describe("proxy controller on the devcluster", () => {
  const name = "managed";
  let uid = "";
  let firstPodUid = "";

  it("provisions a Managed proxy: Pending → Provisioning → Ready with a 127.x Pod IP", async () => {
    await putSecret("ci", "#cloud-config\nfirst\n");
    const created = await createProxy(name, {
      mode: "Managed",
      provider: "kubernetes",
      cloudInit: { secretRef: { name: "ci" } },
    });
    uid = created.metadata.uid!;
    const phases = await drive(name, (p) => p?.status?.phase === "Ready");
    expect(["Pending", "Provisioning", "Ready"]).toEqual(expect.arrayContaining(phases));
    expect(phases.at(-1)).toBe("Ready");
    expect(phases).toContain("Provisioning");

    const p = await getProxy(name);
    expect(p.metadata.finalizers).toContain("crawl.kubefn.dev/finalizer");
    expect(p.status?.ip).toMatch(/^127\./);
    expect(conditionOf(p, "Provisioned")).toMatchObject({ status: "True", reason: "Created" });
    expect(p.status?.providerID).toBe(`kubernetes://${namespace}/${nameFromUID(uid)}`);
    const pods = await podsOf(uid);
    expect(pods).toHaveLength(1);
    firstPodUid = pods[0]!.metadata.uid!;
  });

  it("a second pass on the converged Proxy makes zero writes", async () => {
    transport.reset();
    const result = await runPass(ctx, registry, message(name));
    expect(result).toMatchObject({ result: "awaitSweep", wroteStatus: false });
    expect(transport.counts().writes).toBe(0);
  });

  it("rotating the cloud-init Secret replaces the Pod", async () => {
    const before = (await getProxy(name)).metadata.annotations?.[proxySpecHashAnnotation];
    await putSecret("ci", "#cloud-config\nsecond\n");
    const phases = await drive(name, async (p) => {
      if (p?.status?.phase !== "Ready") return false;
      const pods = await podsOf(uid);
      return pods.length === 1 && pods[0]!.metadata.uid !== firstPodUid;
    });
    expect(phases).toContain("Provisioning");
    const p = await getProxy(name);
    expect(p.metadata.annotations?.[proxySpecHashAnnotation]).not.toBe(before);
    const [pod] = await podsOf(uid);
    // The new cloud-init reaches the new Pod through its Secret volume, not its spec.
    expect(JSON.stringify(pod)).not.toContain("second");
    const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(Resources.Secret, {
      namespace,
      name: `${pod!.metadata.name}-cloud-init`,
    });
    expect(Buffer.from(secret.data?.["user-data"] ?? "", "base64").toString()).toBe(
      "#cloud-config\nsecond\n",
    );
    expect(secret.metadata.ownerReferences?.[0]).toMatchObject({ kind: "Pod", uid: pod!.metadata.uid });
  });

  it("deleting removes the Pod before the finalizer goes", async () => {
    await kube.delete(proxyResource, { namespace, name });
    await drive(name, async (p) => {
      if (p) return false;
      expect(await podsOf(uid)).toEqual([]);
      return true;
    });
  });

  it("External never has a finalizer or a provider: switching Managed → External deletes the Pod, then drops providerID and finalizer", async () => {
    const created = await createProxy("switch", { mode: "Managed", provider: "kubernetes" });
    const switchUid = created.metadata.uid!;
    await drive("switch", (p) => p?.status?.phase === "Ready");
    expect(await podsOf(switchUid)).toHaveLength(1);

    await kube.patch(
      proxyResource,
      { namespace, name: "switch" },
      { type: "merge", body: { spec: { mode: "External", endpoint: { host: "192.0.2.10", port: 3128 } } } },
    );
    await drive("switch", async (p) => {
      if (!p || p.metadata.finalizers?.length) return false;
      return (await podsOf(switchUid)).length === 0;
    });
    const p = await getProxy("switch");
    expect(p.metadata.finalizers ?? []).toEqual([]);
    expect(p.metadata.annotations?.[proxySpecHashAnnotation]).toBeUndefined();
    expect(p.status?.providerID).toBeUndefined();
    expect(p.status?.ip).toBe("192.0.2.10");
    expect(conditionOf(p, "Provisioned")).toMatchObject({ status: "True", reason: "ExternalEndpoint" });

    transport.reset();
    await runPass(ctx, registry, message("switch"));
    expect(transport.counts().writes).toBe(0);
    // Without a finalizer, deletion is immediate.
    await kube.delete(proxyResource, { namespace, name: "switch" });
    await expect(getProxy("switch")).rejects.toSatisfy(isNotFound);
  });

  it("50 passes started at once for a new Proxy leave exactly one Pod", async () => {
    const created = await createProxy("burst", { mode: "Managed", provider: "kubernetes" });
    const burst = async () => {
      const results = await Promise.all(
        Array.from({ length: 50 }, () => runPass(ctx, registry, message("burst"))),
      );
      // Losers of each race requeue (conflict); nothing may fail for good.
      expect(results.filter((r) => r.errorClass === "permanent")).toEqual([]);
    };
    await burst(); // the finalizer race
    await burst(); // the create race
    await drive("burst", (p) => p?.status?.phase === "Ready");
    expect(await podsOf(created.metadata.uid!)).toHaveLength(1);

    await kube.delete(proxyResource, { namespace, name: "burst" });
    await drive("burst", (p) => p === undefined);
    expect(await podsOf(created.metadata.uid!)).toEqual([]);
  });
});
