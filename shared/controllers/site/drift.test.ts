import { beforeEach, describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { type Context, createRegistry, type Listed, runPass } from "../../runtime/index.ts";
import { siteResource } from "./api.ts";
import { defaultSiteRegistry } from "./components/index.ts";
import { siteController } from "./controller.ts";
import { siteDriftReason } from "./drift.ts";
import { desiredEnv } from "./env.ts";

const config = {
  imageRegistry: "ghcr.io/unbounded",
  imageTag: "v1",
  apiServerEndpoint: "https://10.0.0.1:6443",
};
const ns = "kubefn-system";
const components = defaultSiteRegistry();
const env = desiredEnv({ namespace: ns, fieldOwner: "unbounded-operator", controller: "site", config });

/** What the sweep's two lists would hold now: the namespace's ConfigMaps and Deployments. */
async function listedOf(kube: FakeKube): Promise<Listed> {
  const index = new Map<string, Map<string, KubeObject>>();
  for (const [name, res] of [
    ["configmaps", Resources.ConfigMap],
    ["deployments", Resources.Deployment],
  ] as const) {
    const items = (await kube.list(res, { namespace: ns })).items;
    index.set(name, new Map(items.map((o) => [o.metadata.name ?? "", o])));
  }
  return {
    get: (list, key) => (key.namespace === ns ? index.get(list)?.get(key.name) : undefined),
    available: (list) => index.has(list),
  };
}

describe("Site drift from lists", () => {
  let kube: FakeKube;
  let ctx: Context;
  const registry = createRegistry([siteController({ registry: components, env: { config } })]);
  const converged = async (name: string, spec: Record<string, unknown> = {}) => {
    kube.seed(siteResource, {
      apiVersion: "unbounded-cloud.io/v1alpha3",
      kind: "Site",
      metadata: { name, uid: `uid-${name}`, generation: 1 },
      spec,
    });
    await runPass(ctx, registry, { request: { controller: "site", name }, attempt: 0 });
    return kube.get(siteResource, { name });
  };
  const reason = async (site: KubeObject) => siteDriftReason(site, await listedOf(kube), components, env);

  beforeEach(() => {
    kube = new FakeKube();
    ctx = fakeContext(kube).ctx;
  });

  it("a converged Site needs no pass", async () => {
    expect(await reason(await converged("west"))).toBeUndefined();
  });

  it.each([
    [
      "its storage ConfigMap deleted",
      "missing:ConfigMap",
      async (k: FakeKube) => {
        await k.delete(Resources.ConfigMap, { namespace: ns, name: "storage-west" });
      },
    ],
    [
      "its metalman Deployment deleted",
      "missing:Deployment",
      async (k: FakeKube) => {
        await k.delete(Resources.Deployment, { namespace: ns, name: "metalman-west" });
      },
    ],
    [
      "its storage ConfigMap edited by hand",
      "changed:ConfigMap",
      async (k: FakeKube) => {
        const cm = await k.get(Resources.ConfigMap, { namespace: ns, name: "storage-west" });
        await k.update(Resources.ConfigMap, {
          ...cm,
          data: { ...(cm.data as object), "storage-class": "fast" },
        });
      },
    ],
    [
      "its metalman Deployment's image edited by hand",
      "changed:Deployment",
      async (k: FakeKube) => {
        const d = await k.get(Resources.Deployment, { namespace: ns, name: "metalman-west" });
        const spec = structuredClone(d.spec) as { template: { spec: { containers: { image: string }[] } } };
        spec.template.spec.containers[0]!.image = "evil:latest";
        await k.update(Resources.Deployment, { ...d, spec });
      },
    ],
    [
      "a metalman override ConfigMap written since (its config must change)",
      "changed:ConfigMap",
      async (k: FakeKube) => {
        await k.create(Resources.ConfigMap, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { namespace: ns, name: "metalman-config-west" },
          data: { "pxe-boot": "http" },
        });
      },
    ],
  ])("%s → %s", async (_what, want, drift) => {
    const site = await converged("west");
    await drift(kube);
    expect(await reason(site)).toBe(want);
  });

  it.each([
    ["metalman-west", "unavailable:MetalmanReady"],
    ["machina", "unavailable:MachinaReady"],
  ])("its Deployment %s stops running under a True condition → %s", async (name, want) => {
    const site = await converged("west");
    kube.rollsOutDeployments = false;
    const d = await kube.get(Resources.Deployment, { namespace: ns, name });
    await kube.updateStatus(Resources.Deployment, {
      ...d,
      status: { observedGeneration: 0, replicas: 1, updatedReplicas: 1, availableReplicas: 0 },
    });
    expect(await reason(site)).toBe(want);
  });

  it("a component disabled since: its leftover object is a reason, and gone once the pass cleaned up", async () => {
    const site = await converged("west");
    const disabled = { ...site, spec: { components: { storage: { enabled: false } } } };
    expect(await reason(disabled)).toBe("disabled:ConfigMap");
    await kube.delete(Resources.ConfigMap, { namespace: ns, name: "storage-west" });
    expect(await reason(disabled)).toBeUndefined();
  });

  it("conditions: missing, not True, or of an older generation; the summary missing", async () => {
    const site = await converged("west");
    const status = site.status as { conditions: { type: string; status: string }[] };
    expect(await reason({ ...site, metadata: { ...site.metadata, generation: 2 } })).toBe("generation");
    const notTrue = structuredClone(site);
    (notTrue.status as typeof status).conditions[2]!.status = "False";
    expect(await reason(notTrue)).toBe(`status:${status.conditions[2]!.type}`);
    const without = (type: string) => {
      const copy = structuredClone(site);
      const s = copy.status as typeof status;
      s.conditions = s.conditions.filter((c) => c.type !== type);
      return copy;
    };
    expect(await reason(without("StorageReady"))).toBe("status:StorageReady");
    // A Site converged before the summary existed gets one pass that writes it.
    expect(await reason(without("Ready"))).toBe("summary");
    expect(
      await reason({ ...site, metadata: { ...site.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } }),
    ).toBe("deleting");
  });
});
