import { describe, expect, it } from "vitest";
import { upsertOwnerReference } from "../../kube/owner-references.ts";
import type { KubeObject, OwnerReference } from "../../kube/port.ts";
import type { Site } from "./api.ts";
import {
  configMapPayloadChanged,
  configMapPayloadHash,
  isRBACObject,
  retargetNamespaceOf,
  setPodSpecImages,
  siteNodeAffinity,
  siteOwnerReference,
} from "./manifests.ts";
import { parseManifests } from "./manifests-yaml.ts";

const cm = (data?: Record<string, string>, binaryData?: Record<string, string>) => ({
  metadata: { name: "c", resourceVersion: String(Math.random()) },
  ...(data ? { data } : {}),
  ...(binaryData ? { binaryData } : {}),
});

describe("ConfigMap payload", () => {
  it.each([
    ["same data, other metadata", cm({ a: "1" }), cm({ a: "1" }), false],
    ["key order does not matter", cm({ a: "1", b: "2" }), cm({ b: "2", a: "1" }), false],
    ["absent and empty data are equal", cm(), cm({}), false],
    ["changed value", cm({ a: "1" }), cm({ a: "2" }), true],
    ["added key", cm({ a: "1" }), cm({ a: "1", b: "2" }), true],
    ["binaryData counts", cm({ a: "1" }), cm({ a: "1" }, { bin: "AAE=" }), true],
    ["data moved to binaryData", cm({ a: "MQ==" }), cm(undefined, { a: "MQ==" }), true],
  ])("%s → changed %s", async (_name, a, b, changed) => {
    expect(configMapPayloadChanged(a, b)).toBe(changed);
    expect((await configMapPayloadHash(a)) !== (await configMapPayloadHash(b))).toBe(changed);
  });

  it("hashes to 64 hex digits", async () => {
    expect(await configMapPayloadHash(cm({ a: "1" }))).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe("siteNodeAffinity", () => {
  it("ORs the canonical and the deprecated site label", () => {
    const terms = (
      siteNodeAffinity("west") as {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: { matchExpressions: unknown[] }[];
          };
        };
      }
    ).nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
    expect(terms).toEqual([
      { matchExpressions: [{ key: "unbounded-cloud.io/site", operator: "In", values: ["west"] }] },
      { matchExpressions: [{ key: "net.unbounded-cloud.io/site", operator: "In", values: ["west"] }] },
    ]);
  });
});

describe("setPodSpecImages", () => {
  it("replaces every init and main container image of a workload", () => {
    const d: KubeObject = {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: "d" },
      spec: {
        template: {
          spec: {
            initContainers: [{ name: "i", image: "old" }],
            containers: [{ name: "a" }, { name: "b", image: "x" }],
          },
        },
      },
    };
    setPodSpecImages(d, "reg/img:v1");
    expect(JSON.stringify(d).match(/reg\/img:v1/g)).toHaveLength(3);
  });

  it("sets a Pod's containers directly", () => {
    const p: KubeObject = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {},
      spec: { containers: [{ name: "a" }] },
    };
    setPodSpecImages(p, "i");
    expect(p.spec).toEqual({ containers: [{ name: "a", image: "i" }] });
  });

  it("throws for an object without a pod spec", () => {
    expect(() =>
      setPodSpecImages({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }, "i"),
    ).toThrow(/no pod spec/);
  });
});

describe("isRBACObject", () => {
  const obj = (kind: string, name: string): KubeObject => ({ apiVersion: "v1", kind, metadata: { name } });
  it.each([
    ["ServiceAccount", "metalman", true],
    ["ClusterRole", "unbounded:metalman-reader", true],
    ["RoleBinding", "metalman", true],
    ["ServiceAccount", "net", false],
    ["ConfigMap", "metalman", false],
    ["Deployment", "metalman", false],
  ])("%s %s → %s", (kind, name, expected) => {
    expect(isRBACObject(obj(kind, name), "metalman")).toBe(expected);
  });
});

describe("retargetNamespaceOf", () => {
  it("rewrites the build-time namespace in metadata and binding subjects only", () => {
    const binding: KubeObject = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "b", namespace: "kubefn-system" },
      subjects: [
        { kind: "ServiceAccount", name: "a", namespace: "kubefn-system" },
        { kind: "ServiceAccount", name: "b", namespace: "elsewhere" },
      ],
    };
    retargetNamespaceOf(binding, "ops");
    expect(binding.metadata.namespace).toBe("ops");
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: "a", namespace: "ops" },
      { kind: "ServiceAccount", name: "b", namespace: "elsewhere" },
    ]);
  });

  it("is a no-op in the default install", () => {
    const obj: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", namespace: "kubefn-system" },
    };
    retargetNamespaceOf(obj, "kubefn-system");
    expect(obj.metadata.namespace).toBe("kubefn-system");
  });
});

describe("parseManifests", () => {
  it("reads every document and skips empty ones", () => {
    const objects = parseManifests(
      "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b}\n",
    );
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(["ConfigMap/a", "ServiceAccount/b"]);
  });
});

describe("siteOwnerReference and upsertOwnerReference", () => {
  const site = {
    apiVersion: "unbounded-cloud.io/v1alpha3",
    kind: "Site",
    metadata: { name: "west", uid: "uid-west" },
    spec: {},
  } as Site;

  it("is a controller reference without blockOwnerDeletion", () => {
    expect(siteOwnerReference(site)).toEqual({
      apiVersion: "unbounded-cloud.io/v1alpha3",
      kind: "Site",
      name: "west",
      uid: "uid-west",
      controller: true,
    });
  });

  const ref = siteOwnerReference(site);
  const other: OwnerReference = { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "uid-x" };
  it.each<[string, OwnerReference[] | undefined, boolean, OwnerReference[]]>([
    ["absent → added", undefined, true, [ref]],
    ["another owner kept, ours appended", [other], true, [other, ref]],
    ["already a controller ref → unchanged", [{ ...ref }], false, [ref]],
    ["adopted before controller refs → converges", [{ ...ref, controller: false }], true, [ref]],
    ["renamed owner (same UID) → rewritten", [{ ...ref, name: "old" }], true, [ref]],
  ])("%s", (_name, refs, changed, expected) => {
    const first = upsertOwnerReference(refs, ref);
    expect(first).toEqual({ refs: expected, changed });
    expect(upsertOwnerReference(first.refs, ref).changed).toBe(false);
  });
});
