/**
 * The contract the unit tests' FakeKube (test/support/fake-kube.ts) promises, checked against
 * the real API server with the same cases: whatever a unit test learns from the fake about
 * AlreadyExists, label selectors, finalizers and resourceVersion conflicts, the cluster does too.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createKube,
  isAlreadyExists,
  isConflict,
  isNotFound,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { kubeConfig } from "../setup/cluster.ts";
import { FakeKube } from "../support/fake-kube.ts";

const ns = `contract-${randomBytes(3).toString("hex")}`;
const ConfigMap = Resources.ConfigMap;
let real: Kube;

beforeAll(async () => {
  real = createKube(createNodeTransport(kubeConfig()));
  await real.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
}, 60_000);

afterAll(async () => {
  await real?.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
});

const configMap = (name: string, meta: Partial<KubeObject["metadata"]> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: ns, ...meta },
  data: { k: "v" },
});

async function thrown(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  return undefined;
}

const kubes: [string, () => Kube][] = [
  ["FakeKube", () => new FakeKube()],
  ["the API server", () => real],
];

describe.each(kubes)("Kube contract: %s", (label, kubeOf) => {
  const suffix = label === "FakeKube" ? "-f" : "-r";
  const n = (name: string) => `${name}${suffix}`;

  it("a second create of one name is AlreadyExists; the server sets uid and creationTimestamp", async () => {
    const kube = kubeOf();
    const created = await kube.create(ConfigMap, configMap(n("twice")));
    expect(created.metadata.uid).toEqual(expect.any(String));
    expect(created.metadata.creationTimestamp).toEqual(expect.any(String));
    expect(isAlreadyExists(await thrown(() => kube.create(ConfigMap, configMap(n("twice")))))).toBe(true);
  });

  it("list filters by label selector (=, !=, in, exists) within the namespace", async () => {
    const kube = kubeOf();
    await kube.create(ConfigMap, configMap(n("sel-a"), { labels: { app: "a", tier: "x" } }));
    await kube.create(ConfigMap, configMap(n("sel-b"), { labels: { app: "b" } }));
    await kube.create(ConfigMap, configMap(n("sel-none")));
    const names = async (labelSelector: string) =>
      (await kube.list(ConfigMap, { namespace: ns, labelSelector })).items
        .map((o) => o.metadata.name)
        .filter((name) => name?.startsWith("sel-") && name.endsWith(suffix))
        .sort();
    expect(await names("app=a")).toEqual([n("sel-a")]);
    expect(await names("app!=a")).toEqual([n("sel-b"), n("sel-none")]);
    expect(await names("app in (a,b)")).toEqual([n("sel-a"), n("sel-b")]);
    expect(await names("tier")).toEqual([n("sel-a")]);
    expect(await names("app=a,tier=y")).toEqual([]);
  });

  it("a finalizer holds deletion: deletionTimestamp set, the object stays until the last finalizer goes", async () => {
    const kube = kubeOf();
    await kube.create(ConfigMap, configMap(n("held"), { finalizers: ["kubefn.dev/test"] }));
    await kube.delete(ConfigMap, { namespace: ns, name: n("held") });
    const deleting = await kube.get(ConfigMap, { namespace: ns, name: n("held") });
    expect(deleting.metadata.deletionTimestamp).toEqual(expect.any(String));
    expect(deleting.metadata.finalizers).toEqual(["kubefn.dev/test"]);
    await kube.update(ConfigMap, { ...deleting, metadata: { ...deleting.metadata, finalizers: [] } });
    expect(isNotFound(await thrown(() => kube.get(ConfigMap, { namespace: ns, name: n("held") })))).toBe(
      true,
    );
  });

  it("a write with a stale resourceVersion is a Conflict (update, merge patch, delete precondition)", async () => {
    const kube = kubeOf();
    const first = await kube.create(ConfigMap, configMap(n("rv")));
    const second = await kube.update(ConfigMap, { ...first, data: { k: "w" } });
    expect(second.metadata.resourceVersion).not.toBe(first.metadata.resourceVersion);
    expect(isConflict(await thrown(() => kube.update(ConfigMap, { ...first, data: { k: "x" } })))).toBe(true);
    const staleMerge = {
      type: "merge" as const,
      body: { metadata: { resourceVersion: first.metadata.resourceVersion }, data: { k: "y" } },
    };
    expect(
      isConflict(await thrown(() => kube.patch(ConfigMap, { namespace: ns, name: n("rv") }, staleMerge))),
    ).toBe(true);
    const key = { namespace: ns, name: n("rv") };
    expect(
      isConflict(await thrown(() => kube.delete(ConfigMap, key, { preconditions: { uid: "not-its-uid" } }))),
    ).toBe(true);
    expect((await kube.get(ConfigMap, key)).data).toEqual({ k: "w" });
  });
});
