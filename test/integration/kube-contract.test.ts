/**
 * The Kube port's contract against a real API server (infra/devcluster), run once per transport:
 * the node transport authenticated by the admin kubeconfig (HTTPS, cluster CA), and the fetch
 * transport through the devcluster's plain-HTTP loopback proxy with the admin bearer token.
 * Every behaviour the controllers rely on is pinned here: typed errors, resourceVersion guards,
 * patch flavours, server-side apply conflicts, the status subresource, delete preconditions,
 * pagination, and ensureObject's zero-write steady state.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import {
  AlreadyExistsError,
  ConflictError,
  type CountingTransport,
  classifyError,
  controllerRefTo,
  countingTransport,
  createFetchTransport,
  createKube,
  ensureObject,
  ForbiddenError,
  fieldsPatch,
  InvalidError,
  isNotFound,
  type Kube,
  type KubeObject,
  listAll,
  NotFoundError,
  Resources,
  serverSideApply,
  type Transport,
} from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";

declare module "vitest" {
  // biome-ignore lint/suspicious/noExportsInTest: augments vitest's ProvidedContext (test/setup provides it).
  export interface ProvidedContext {
    /** Path of the devcluster's admin kubeconfig. */
    kubeconfig: string;
    /** Plain-HTTP loopback URL forwarding to the API server, Authorization passed through. */
    httpProxy: string;
    /** The admin bearer token. */
    adminToken: string;
  }
}

/** The admin token: provided by the harness, else read from the admin kubeconfig. */
function adminToken(): string {
  const provided = inject("adminToken");
  if (provided) return provided;
  const token = loadKubeConfig({ file: inject("kubeconfig") }).getCurrentUser()?.token;
  if (!token) throw new Error("no adminToken provided and the admin kubeconfig has no token");
  return token;
}

const transports: { name: string; make: () => Transport }[] = [
  {
    name: "node transport (admin kubeconfig)",
    make: () => createNodeTransport(loadKubeConfig({ file: inject("kubeconfig") })),
  },
  {
    name: "fetch transport (plain-HTTP proxy, bearer token)",
    make: () => createFetchTransport({ server: inject("httpProxy"), token: adminToken() }),
  },
];

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

interface Service extends KubeObject {
  spec: {
    type?: string;
    clusterIP?: string;
    ports?: { name: string; port: number; protocol: string; targetPort: number }[];
    selector?: Record<string, string>;
  };
}

interface Deployment extends KubeObject {
  spec: Record<string, unknown>;
  status?: { observedGeneration?: number; replicas?: number };
}

describe.each(transports)("$name", ({ make }) => {
  const namespace = `kube-contract-${Math.random().toString(36).slice(2, 8)}`;
  let counting: CountingTransport;
  let kube: Kube;

  function configMap(
    name: string,
    data: Record<string, string> = {},
    labels?: Record<string, string>,
  ): ConfigMap {
    return {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace, ...(labels ? { labels } : {}) },
      data,
    };
  }

  beforeAll(async () => {
    counting = countingTransport(make());
    kube = createKube(counting);
    await kube.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace },
    });
  });

  afterAll(async () => {
    await kube?.delete(Resources.Namespace, { name: namespace }).catch(() => undefined);
  });

  it("creates, gets, and lists by label selector, one page at a time and following continue", async () => {
    for (const i of [1, 2, 3, 4, 5]) {
      await kube.create(Resources.ConfigMap, configMap(`paged-${i}`, { i: String(i) }, { set: "paged" }));
    }
    await kube.create(Resources.ConfigMap, configMap("unlabelled"));

    const got = await kube.get<ConfigMap>(Resources.ConfigMap, { namespace, name: "paged-3" });
    expect(got).toMatchObject({ apiVersion: "v1", kind: "ConfigMap", data: { i: "3" } });
    expect(got.metadata.uid).toBeTruthy();

    const first = await kube.list<ConfigMap>(Resources.ConfigMap, {
      namespace,
      labelSelector: "set=paged",
      limit: 2,
    });
    expect(first.items).toHaveLength(2);
    expect(first.items[0]).toMatchObject({ apiVersion: "v1", kind: "ConfigMap" });
    expect(first.continue).toBeTruthy();
    expect(first.resourceVersion).toBeTruthy();

    counting.reset();
    const all = await listAll<ConfigMap>(kube, Resources.ConfigMap, {
      namespace,
      labelSelector: "set=paged",
      limit: 2,
    });
    expect(all.map((cm) => cm.metadata.name).sort()).toEqual([
      "paged-1",
      "paged-2",
      "paged-3",
      "paged-4",
      "paged-5",
    ]);
    expect(counting.counts()).toEqual({ reads: 3, writes: 0 });

    const byField = await kube.list(Resources.ConfigMap, {
      namespace,
      fieldSelector: "metadata.name=unlabelled",
    });
    expect(byField.items.map((cm) => cm.metadata.name)).toEqual(["unlabelled"]);
  });

  it("refuses a second create with AlreadyExistsError (classified conflict)", async () => {
    await kube.create(Resources.ConfigMap, configMap("twice"));
    const err = await kube.create(Resources.ConfigMap, configMap("twice")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AlreadyExistsError);
    expect(classifyError(err)).toEqual({ class: "conflict", reason: "AlreadyExists" });
  });

  it("guards update by resourceVersion: a stale one gets ConflictError", async () => {
    const created = await kube.create<ConfigMap>(Resources.ConfigMap, configMap("guarded", { v: "1" }));
    const updated = await kube.update<ConfigMap>(Resources.ConfigMap, { ...created, data: { v: "2" } });
    expect(updated.data).toEqual({ v: "2" });
    expect(updated.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);

    const err = await kube
      .update(Resources.ConfigMap, { ...created, data: { v: "3" } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(classifyError(err)).toEqual({ class: "conflict", reason: "Conflict" });
  });

  it("applies merge and JSON patches", async () => {
    await kube.create(Resources.ConfigMap, configMap("patched", { keep: "k", drop: "d" }));
    const merged = await kube.patch<ConfigMap>(
      Resources.ConfigMap,
      { namespace, name: "patched" },
      { type: "merge", body: { data: { drop: null, added: "a" } } },
    );
    expect(merged.data).toEqual({ keep: "k", added: "a" });

    const jsonPatched = await kube.patch<ConfigMap>(
      Resources.ConfigMap,
      { namespace, name: "patched" },
      {
        type: "json",
        ops: [
          { op: "test", path: "/data/keep", value: "k" },
          { op: "replace", path: "/data/keep", value: "k2" },
          { op: "add", path: "/metadata/labels", value: { patched: "yes" } },
        ],
      },
    );
    expect(jsonPatched.data).toEqual({ keep: "k2", added: "a" });
    expect(jsonPatched.metadata.labels).toEqual({ patched: "yes" });
  });

  it("server-side applies with a field manager; a contested field needs force", async () => {
    const mine = configMap("applied", { shared: "mine", onlyMine: "1" });
    const applied = await serverSideApply<ConfigMap>(kube, Resources.ConfigMap, mine, "kubefn-a");
    expect(applied.data).toEqual({ shared: "mine", onlyMine: "1" });

    const theirs = configMap("applied", { shared: "theirs" });
    const err = await serverSideApply(kube, Resources.ConfigMap, theirs, "kubefn-b").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).details?.causes?.[0]?.field).toBe(".data.shared");

    const forced = await serverSideApply<ConfigMap>(kube, Resources.ConfigMap, theirs, "kubefn-b", true);
    expect(forced.data).toEqual({ shared: "theirs", onlyMine: "1" });
    const managers = (forced.metadata.managedFields as { manager: string }[]).map((m) => m.manager).sort();
    expect(managers).toEqual(["kubefn-a", "kubefn-b"]);
  });

  it("writes the status subresource without bumping generation", async () => {
    const created = await kube.create<Deployment>(Resources.Deployment, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "inert", namespace },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: "inert" } },
        template: {
          metadata: { labels: { app: "inert" } },
          spec: { containers: [{ name: "c", image: "example.invalid/none:1" }] },
        },
      },
    });
    expect(created.metadata.generation).toBe(1);

    const withStatus = await kube.updateStatus<Deployment>(Resources.Deployment, {
      ...created,
      spec: { ...created.spec, replicas: 5 },
      status: { observedGeneration: 1, replicas: 0 },
    });
    expect(withStatus.status?.observedGeneration).toBe(1);
    expect(withStatus.metadata.generation).toBe(1);
    expect(withStatus.spec.replicas).toBe(0);

    const stale = await kube.updateStatus(Resources.Deployment, created).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ConflictError);

    const patched = await kube.patchStatus<Deployment>(
      Resources.Deployment,
      { namespace, name: "inert" },
      { type: "merge", body: { status: { replicas: 0, observedGeneration: 1, unavailableReplicas: 0 } } },
    );
    expect(patched.metadata.generation).toBe(1);
  });

  it("deletes with a uid precondition (stale → ConflictError), then get is NotFoundError", async () => {
    const created = await kube.create(Resources.ConfigMap, configMap("doomed"));
    const err = await kube
      .delete(
        Resources.ConfigMap,
        { namespace, name: "doomed" },
        { preconditions: { uid: "00000000-0000-0000-0000-000000000000" } },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);

    await kube.delete(
      Resources.ConfigMap,
      { namespace, name: "doomed" },
      {
        preconditions: { uid: created.metadata.uid! },
        propagationPolicy: "Background",
        gracePeriodSeconds: 0,
      },
    );
    const gone = await kube.get(Resources.ConfigMap, { namespace, name: "doomed" }).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(NotFoundError);
    expect(isNotFound(gone)).toBe(true);
    expect(classifyError(gone)).toEqual({ class: "permanent", reason: "NotFound" });
  });

  it("reports an invalid object as InvalidError with its causes (classified permanent)", async () => {
    const err = await kube.create(Resources.ConfigMap, configMap("Bad_Name")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidError);
    expect((err as InvalidError).causes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "metadata.name", reason: "FieldValueInvalid" }),
      ]),
    );
    expect(classifyError(err)).toEqual({ class: "permanent", reason: "Invalid" });
  });

  it("reports ResourceQuota admission's refusal as ForbiddenError classified quota", async () => {
    const quotaNamespace = `${namespace}-quota`;
    await kube.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: quotaNamespace },
    });
    try {
      const hard = { "count/configmaps": "1" };
      const quota = await kube.create(Resources.ResourceQuota, {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "tight", namespace: quotaNamespace },
        spec: { hard },
      });
      // The devcluster runs no resourcequota controller: publish the usage it would have computed.
      await kube.updateStatus(Resources.ResourceQuota, { ...quota, status: { hard, used: hard } });
      const err = await kube
        .create(Resources.ConfigMap, {
          ...configMap("one-too-many"),
          metadata: { name: "one-too-many", namespace: quotaNamespace },
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ForbiddenError);
      expect((err as ForbiddenError).message).toContain("exceeded quota: tight");
      expect(classifyError(err)).toEqual({ class: "quota", reason: "QuotaExceeded" });
    } finally {
      await kube.delete(Resources.Namespace, { name: quotaNamespace }).catch(() => undefined);
    }
  });

  describe("ensureObject", () => {
    const ownedFields = (observed: Service, desired: Service) =>
      fieldsPatch(observed, desired, ["spec.type", "spec.ports", "spec.selector"]);

    function service(name: string, selector: Record<string, string>): Service {
      return {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name, namespace, labels: { "app.kubernetes.io/managed-by": "kubefn" } },
        spec: {
          type: "ClusterIP",
          ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
          selector,
        },
      };
    }

    let owner: ConfigMap;
    let stranger: ConfigMap;
    beforeAll(async () => {
      owner = await kube.create<ConfigMap>(Resources.ConfigMap, configMap("svc-owner"));
      stranger = await kube.create<ConfigMap>(Resources.ConfigMap, configMap("svc-stranger"));
    });

    it("creates, then leaves a matching object alone with zero writes, then updates drift keeping clusterIP", async () => {
      const created = await ensureObject(kube, Resources.Service, service("owned", { app: "a" }), {
        owner,
        ownedFields,
      });
      expect(created.result).toBe("created");
      if (created.result !== "created") return;
      const clusterIP = (created.object as Service).spec.clusterIP;
      expect(clusterIP).toBeTruthy();
      expect(created.object.metadata.ownerReferences).toEqual([controllerRefTo(owner)]);

      counting.reset();
      const steady = await ensureObject(kube, Resources.Service, service("owned", { app: "a" }), {
        owner,
        ownedFields,
      });
      expect(steady.result).toBe("unchanged");
      expect(counting.counts()).toEqual({ reads: 1, writes: 0 });

      await kube.patch(
        Resources.Service,
        { namespace, name: "owned" },
        { type: "merge", body: { metadata: { labels: { "someone.else/label": "x" } } } },
      );
      counting.reset();
      const drifted = await ensureObject(kube, Resources.Service, service("owned", { app: "b" }), {
        owner,
        ownedFields,
      });
      expect(drifted.result).toBe("updated");
      expect(counting.counts()).toEqual({ reads: 1, writes: 1 });
      if (drifted.result !== "updated") return;
      const svc = drifted.object as Service;
      expect(svc.spec.selector).toEqual({ app: "b" });
      expect(svc.spec.clusterIP).toBe(clusterIP);
      expect(svc.metadata.labels).toMatchObject({
        "someone.else/label": "x",
        "app.kubernetes.io/managed-by": "kubefn",
      });

      counting.reset();
      expect(
        (await ensureObject(kube, Resources.Service, service("owned", { app: "b" }), { owner, ownedFields }))
          .result,
      ).toBe("unchanged");
      expect(counting.counts().writes).toBe(0);
    });

    it("reports a conflict, writing nothing, when another owner controls the object", async () => {
      await ensureObject(kube, Resources.Service, service("theirs", { app: "t" }), {
        owner: stranger,
        ownedFields,
      });
      counting.reset();
      const result = await ensureObject(kube, Resources.Service, service("theirs", { app: "mine" }), {
        owner,
        ownedFields,
      });
      expect(result.result).toBe("conflict");
      if (result.result === "conflict") expect(result.controller?.uid).toBe(stranger.metadata.uid);
      expect(counting.counts()).toEqual({ reads: 1, writes: 0 });
    });

    it("reports a conflict for an object nobody controls (never adopts)", async () => {
      await kube.create(Resources.Service, service("orphan", { app: "o" }));
      const result = await ensureObject(kube, Resources.Service, service("orphan", { app: "o" }), {
        owner,
        ownedFields,
      });
      expect(result.result).toBe("conflict");
      const orphan = await kube.get(Resources.Service, { namespace, name: "orphan" });
      expect(orphan.metadata.ownerReferences).toBeUndefined();
    });
  });
});
