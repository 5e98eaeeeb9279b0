import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import {
  type CreateRequest,
  createKubernetesProvider,
  type Instance,
  isProviderNotFound,
  managedByTagKey,
  managedByTagValue,
  nameFromUID,
  ownerTagKey,
  ownerTags,
  type Provider,
  ProviderError,
} from "../../shared/controllers/proxy/providers/index.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { kubefnKube } from "../security/tenants.ts";
import { kubeConfig } from "../setup/cluster.ts";

/**
 * The pod provider against the devcluster, as kubefn's ServiceAccount: a real API server (RBAC,
 * kubefn's admission policies, quota, validation) and the simulated node that takes Pods to
 * Running with a loopback address.
 */
let kube: Kube;
let provider: Provider;
const namespace = `pod-provider-${Date.now().toString(36)}`;

beforeAll(async () => {
  kube = createKube(createNodeTransport(kubeConfig()));
  // As kubefn's ServiceAccount: its RBAC and admission policies admit what the provider writes.
  provider = createKubernetesProvider({ kube: await kubefnKube(kube) });
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(kube, namespace);
});

afterAll(async () => {
  await kube?.delete(Resources.Namespace, { name: namespace }).catch(() => {});
});

function requestFor(uid: string, extra: Partial<CreateRequest> = {}): CreateRequest {
  return {
    name: nameFromUID(uid),
    namespace,
    cloudInit: "#cloud-config\n",
    instance: { image: "registry.example/forward-proxy:test" },
    tags: ownerTags(uid),
    ...extra,
  };
}

async function pollUntil(
  id: string,
  owner: string,
  done: (inst: Instance | "gone") => boolean,
  timeoutMs = 30_000,
) {
  const deadline = Date.now() + timeoutMs;
  let last: Instance | "gone" | undefined;
  while (Date.now() < deadline) {
    try {
      last = await provider.get(id, owner);
    } catch (err) {
      if (!isProviderNotFound(err)) throw err;
      last = "gone";
    }
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${id} did not reach the expected state; last: ${JSON.stringify(last)}`);
}

describe("Kubernetes pod provider on the devcluster", () => {
  const uid = crypto.randomUUID();
  const req = requestFor(uid);
  let created: Instance;

  it("create → Provisioning → Running with an address", async () => {
    created = await provider.create(req);
    expect(created.id).toBe(`kubernetes://${namespace}/${req.name}`);
    expect(["Provisioning", "Running"]).toContain(created.state);
    expect(created.tags).toMatchObject({ [ownerTagKey]: uid, [managedByTagKey]: managedByTagValue });

    const running = await pollUntil(created.id, uid, (i) => i !== "gone" && i.state === "Running");
    expect(running).toMatchObject({ state: "Running", ip: expect.stringMatching(/^127\./) });
  });

  it("a second create of the same name returns the same instance", async () => {
    const again = await provider.create(req);
    expect(again.id).toBe(created.id);
    expect(again.tags[ownerTagKey]).toBe(uid);
  });

  it("concurrent creates agree", async () => {
    const other = requestFor(crypto.randomUUID());
    const results = await Promise.all([
      provider.create(other),
      provider.create(other),
      provider.create(other),
    ]);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    await provider.delete(results[0]!.id, { owner: other.tags[ownerTagKey]! });
  });

  it("a create over a foreign Pod of that name is a permanent NameConflict", async () => {
    const foreignUid = crypto.randomUUID();
    const pod: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: nameFromUID(foreignUid), namespace, labels: { app: "someone-else" } },
      spec: { containers: [{ name: "c", image: "registry.example/other:1" }] },
    };
    await kube.create(Resources.Pod, pod);
    const err = await provider.create(requestFor(foreignUid)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ errorClass: "permanent", reason: "NameConflict" });
  });

  it("listByTag finds our Pod and not an untagged one", async () => {
    const untagged: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "untagged", namespace, labels: { [managedByTagKey]: "someone-else" } },
      spec: { containers: [{ name: "c", image: "registry.example/other:1" }] },
    };
    await kube.create(Resources.Pod, untagged);

    const byOwner = await provider.listByTag({ key: ownerTagKey, value: uid }, { namespace });
    expect(byOwner.map((i) => i.id)).toEqual([created.id]);
    const managed = await provider.listByTag(
      { key: managedByTagKey, value: managedByTagValue },
      { namespace },
    );
    const ids = managed.map((i) => i.id);
    expect(ids).toContain(created.id);
    expect(ids).not.toContain(`kubernetes://${namespace}/untagged`);
  });

  it("listByTag across namespaces is refused as not opted in (kubefn-tenant is bound per namespace)", async () => {
    await expect(
      provider.listByTag({ key: managedByTagKey, value: managedByTagValue }),
    ).rejects.toMatchObject({
      name: "NamespaceNotOptedInError",
      reason: "NamespaceNotOptedIn",
    });
  });

  it("delete → NotFound eventually; a second delete is fine", async () => {
    await provider.delete(created.id, { owner: uid });
    await pollUntil(created.id, uid, (i) => i === "gone" || i.state === "Terminating");
    await pollUntil(created.id, uid, (i) => i === "gone");
    await expect(provider.delete(created.id, { owner: uid })).resolves.toBeUndefined();
  });

  it("an invalid Pod is permanent", async () => {
    const bad = requestFor(crypto.randomUUID(), { instance: { image: "" } });
    const err = await provider.create({ ...bad, name: "Not_A_DNS_Label" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ errorClass: "permanent", reason: "Invalid" });
  });

  it("a ResourceQuota with pods: 0 makes create a quota error", async () => {
    const quotaNs = `${namespace}-quota`;
    await kube.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: quotaNs },
    });
    await optInNamespace(kube, quotaNs);
    try {
      await kube.create(Resources.ResourceQuota, {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "no-pods", namespace: quotaNs },
        spec: { hard: { pods: "0" } },
      });
      // The devcluster's resourcequota controller fills in status; admission enforces the quota
      // only once it has (a status written here would race that controller with a 409).
      const statusDeadline = Date.now() + 30_000;
      for (;;) {
        const q = await kube.get(Resources.ResourceQuota, { namespace: quotaNs, name: "no-pods" });
        const hard = (q?.status as { hard?: Record<string, string> } | undefined)?.hard;
        if (hard?.pods !== undefined) break;
        if (Date.now() > statusDeadline) throw new Error("the resourcequota controller never set status");
        await new Promise((r) => setTimeout(r, 200));
      }

      const req = requestFor(crypto.randomUUID(), { namespace: quotaNs });
      const deadline = Date.now() + 15_000;
      let err: unknown;
      while (Date.now() < deadline) {
        // Admission sees the quota through an informer: until it has, a create may slip through.
        const inst = await provider.create(req).catch((e: unknown) => {
          err = e;
          return undefined;
        });
        if (!inst) break;
        await provider.delete(inst.id, { owner: req.tags[ownerTagKey]! });
        await pollUntil(inst.id, req.tags[ownerTagKey]!, (i) => i === "gone");
      }
      expect(err).toBeInstanceOf(ProviderError);
      expect(err).toMatchObject({ errorClass: "quota", reason: "QuotaExceeded" });
    } finally {
      await kube.delete(Resources.Namespace, { name: quotaNs }).catch(() => {});
    }
  });
});
