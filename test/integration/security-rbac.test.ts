/**
 * The functions' identity as an attacker would use it: the kubefn ServiceAccount's token taken
 * outside kubefn. Its effective permissions are printed (`kubectl auth can-i --list` as the
 * identity) and every verb must be one the code calls; every write outside kubefn's own objects is
 * refused by the API server itself (RBAC, then the ValidatingAdmissionPolicy).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createKube,
  ForbiddenError,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { canIList, type Grant } from "../security/identity.ts";
import { kubefnKube } from "../security/tenants.ts";
import {
  type AuditEvent,
  auditEventsSince,
  eventually,
  kubeConfig,
  waitForAuditEvent,
} from "../setup/cluster.ts";

const kubefnUser = "system:serviceaccount:kubefn-system:kubefn";
const repo = fileURLToPath(new URL("../../", import.meta.url));
const victims = `victims-${Date.now().toString(36)}`;

/**
 * Every (resource, verb) the code calls, with where: the file and a fragment of the call. A verb
 * RBAC grants must appear here, and every call site named here must still exist.
 */
const calls: Array<{ resource: string; verbs: string[]; at: Array<[file: string, fragment: string]> }> = [
  // Events about the primaries, every operator.
  {
    resource: "events.events.k8s.io",
    verbs: ["get", "create", "patch"],
    at: [
      ["shared/kube/events.ts", "await kube.create(Resources.Event"],
      ["shared/kube/events.ts", "existing = await kube.get(Resources.Event"],
      ["shared/kube/events.ts", "await kube.patch(\n        Resources.Event"],
    ],
  },
  // Proxy operator.
  {
    resource: "proxies.crawl.kubefn.dev",
    verbs: ["get", "list", "patch"],
    at: [
      ["shared/runtime/executor.ts", "ctx.kube.get(def.for"],
      ["shared/controllers/proxy/discovery/list-proxies.ts", "listAll(kube, proxyResource"],
      ["shared/controllers/proxy/metadata.ts", "patchMetadataGuarded"],
    ],
  },
  {
    resource: "proxies.crawl.kubefn.dev/status",
    verbs: ["patch"],
    at: [
      ["shared/runtime/executor.ts", "ctx.kube.patchStatus(def.for"],
      ["shared/health/apply.ts", "deps.kube.patchStatus(resource"],
    ],
  },
  {
    resource: "secrets",
    verbs: ["get", "create", "delete", "update"],
    at: [
      ["shared/controllers/proxy/cloud-init.ts", "kube.get(Resources.Secret"],
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.create<CloudInitSecret>(secretResource"],
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.delete(secretResource"],
      ["shared/controllers/subpool/reconcile.ts", "Resources.Secret"],
    ],
  },
  {
    resource: "pods",
    verbs: ["get", "list", "create", "delete"],
    at: [
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.get<Pod>(podResource"],
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.list<Pod>(podResource"],
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.create<Pod>(podResource"],
      ["shared/controllers/proxy/providers/kubernetes.ts", "kube.delete(podResource"],
    ],
  },
  {
    resource: "leases.coordination.k8s.io",
    verbs: ["get", "list", "create", "update", "delete"],
    at: [
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.get<ProxyLease>(leaseResource"],
      [
        "shared/controllers/proxy/leases/sweep-task.ts",
        "listAll<ProxyLease & KubeObject>(ctx.kube, Resources.Lease",
      ],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.create<ProxyLease>(leaseResource"],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.update<ProxyLease>("],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.delete("],
    ],
  },
  // SubPool operator.
  {
    resource: "subpools.subrelay.example.com",
    verbs: ["get", "list", "patch"],
    at: [
      ["shared/runtime/executor.ts", "ctx.kube.get(def.for"],
      ["shared/runtime/drift.ts", "const page = await kube.list(resource"],
      ["shared/controllers/subpool/metadata.ts", "patchMetadataGuarded"],
    ],
  },
  {
    resource: "subpools.subrelay.example.com/status",
    verbs: ["patch"],
    at: [["shared/runtime/executor.ts", "ctx.kube.patchStatus(def.for"]],
  },
  ...["namespaces", "configmaps", "serviceaccounts", "services", "resourcequotas"].map((resource) => ({
    resource,
    verbs: ["get", "list", "create", "update", ...(resource === "namespaces" ? ["delete"] : [])],
    at: [
      ["shared/runtime/drift.ts", "const page = await kube.list(resource"],
      ["shared/kube/ensure.ts", "kube.get<T>(res, key)"],
      ["shared/kube/ensure.ts", "kube.create<T>("],
      ["shared/kube/ensure.ts", "kube.update<T>(res, next"],
      ["shared/controllers/subpool/deletion.ts", "ctx.kube.delete("],
    ] as Array<[string, string]>,
  })),
  {
    resource: "limitranges",
    verbs: ["list", "delete"],
    at: [
      ["shared/controllers/subpool/reconcile.ts", "listAll(kube, Resources.LimitRange"],
      ["shared/controllers/subpool/reconcile.ts", "deleteIfPresent(ctx, Resources.LimitRange"],
    ],
  },
  ...["statefulsets.apps", "networkpolicies.networking.k8s.io", "poddisruptionbudgets.policy"].map(
    (resource) => ({
      resource,
      verbs: ["get", "list", "create", "update"],
      at: [
        ["shared/runtime/drift.ts", "const page = await kube.list(resource"],
        ["shared/kube/ensure.ts", "kube.get<T>(res, key)"],
        ["shared/kube/ensure.ts", "kube.create<T>("],
        ["shared/kube/ensure.ts", "kube.update<T>(res, next"],
      ] as Array<[string, string]>,
    }),
  ),
  {
    resource: "httproutes.gateway.networking.k8s.io",
    verbs: ["get", "list", "create", "update", "delete"],
    at: [
      ["shared/runtime/drift.ts", "const page = await kube.list(resource"],
      ["shared/controllers/subpool/reconcile.ts", "ensureObject(\n        kube,\n        httpRouteResource"],
      ["shared/controllers/subpool/reconcile.ts", "deleteIfPresent(ctx, httpRouteResource"],
    ],
  },
  {
    resource: "gateways.gateway.networking.k8s.io",
    verbs: ["get"],
    at: [["shared/controllers/subpool/reconcile.ts", "getOrUndefined(ctx, gatewayResource"]],
  },
  {
    resource: "endpointslices.discovery.k8s.io",
    verbs: ["list"],
    at: [["shared/controllers/subpool/reconcile.ts", "endpointSliceResource"]],
  },
  // Site operator.
  {
    resource: "sites.unbounded-cloud.io",
    verbs: ["get", "list"],
    at: [
      ["shared/runtime/executor.ts", "ctx.kube.get(def.for"],
      ["shared/controllers/site/env.ts", "listAll(kube, siteResource"],
    ],
  },
  {
    resource: "sites.unbounded-cloud.io/status",
    verbs: ["patch"],
    at: [["shared/runtime/executor.ts", "ctx.kube.patchStatus(def.for"]],
  },
  ...["configmaps", "serviceaccounts", "deployments.apps"].map((resource) => ({
    resource,
    // create: a server-side apply of an object that does not exist yet is a create. list: the
    // Site drift lists in the operator namespace (ConfigMaps, Deployments).
    verbs: ["get", "create", "patch", "delete", ...(resource === "serviceaccounts" ? [] : ["list"])],
    at: [
      ["shared/controllers/site/env.ts", "kube.get(res, key(obj))"],
      ["shared/controllers/site/env.ts", "serverSideApply(kube, res, obj"],
      ["shared/controllers/site/env.ts", "await kube.delete("],
      ...(resource === "serviceaccounts"
        ? []
        : [["shared/controllers/site/drift.ts", "namespace: settings.namespace"]]),
    ] as Array<[string, string]>,
  })),
];

/**
 * What every authenticated user may do (system:basic-user, system:discovery, and reading the
 * cluster's public trust bundles): not kubefn's grants.
 */
function grantedToEveryone(g: Grant): boolean {
  return (
    g.nonResourceURLs.length > 0 ||
    (g.resource === "clustertrustbundles.certificates.k8s.io" &&
      g.verbs.every((v) => ["get", "list", "watch"].includes(v))) ||
    /^self(subject)?\w*reviews\.(authentication|authorization)\.k8s\.io$/.test(g.resource)
  );
}

let admin: Kube;
let kubefn: Kube;

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()));
  kubefn = await kubefnKube(admin);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: victims },
  });
});

afterAll(async () => {
  await admin?.delete(Resources.Namespace, { name: victims }).catch(() => {});
});

describe("the kubefn identity's effective permissions", () => {
  it("prints them, and every granted verb is one the code calls", async () => {
    const clusterWide = await canIList(kubefnUser);
    const inOwnNamespace = await canIList(kubefnUser, "kubefn-system");
    console.log(
      `kubectl auth can-i --list --as=${kubefnUser}\n${clusterWide.table}\n` +
        `... -n kubefn-system\n${inOwnNamespace.table}`,
    );
    const allowed = new Map<string, Set<string>>();
    for (const c of calls) {
      const set = allowed.get(c.resource) ?? new Set<string>();
      for (const v of c.verbs) set.add(v);
      allowed.set(c.resource, set);
    }
    const extra: string[] = [];
    for (const g of [...clusterWide.grants, ...inOwnNamespace.grants]) {
      if (grantedToEveryone(g)) continue;
      for (const verb of g.verbs) {
        if (!allowed.get(g.resource)?.has(verb)) extra.push(`${verb} ${g.resource}`);
      }
    }
    expect(extra, "granted verbs no code calls").toEqual([]);
    // Never: list/watch Secrets, any "*", escalate/bind/impersonate.
    const flat = [...clusterWide.grants, ...inOwnNamespace.grants].flatMap((g) =>
      g.verbs.map((v) => `${v} ${g.resource}`),
    );
    expect(flat.filter((s) => /^(list|watch) secrets$|\*|escalate|bind|impersonate/.test(s))).toEqual([]);
    // The Site's components are granted only in the operator namespace.
    expect(clusterWide.grants.some((g) => g.resource === "deployments.apps")).toBe(false);
    expect(inOwnNamespace.grants.some((g) => g.resource === "deployments.apps")).toBe(true);
  });

  it("every call site named in the table still exists", () => {
    const missing = calls.flatMap((c) =>
      c.at
        .filter(([file, fragment]) => !readFileSync(`${repo}${file}`, "utf8").includes(fragment))
        .map(([file, fragment]) => `${c.resource}: ${file} (${fragment})`),
    );
    expect(missing).toEqual([]);
  });
});

describe("the kubefn token used outside kubefn", () => {
  const configMap = (name: string, namespace: string, labels?: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace, ...(labels ? { labels } : {}) },
    data: { k: "v" },
  });

  beforeAll(async () => {
    await admin.create(Resources.ConfigMap, configMap("aws-auth", victims));
    await admin.create(Resources.Pod, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "tenant-app", namespace: victims },
      spec: { containers: [{ name: "app", image: "registry.example/app:1" }] },
    });
    await admin.create(Resources.Lease, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "leader-election", namespace: victims },
      spec: { holderIdentity: "controller-0", leaseDurationSeconds: 15 },
    });
  });

  /** The write fails with 403 from the API server; returns its message. */
  async function refused(write: () => Promise<unknown>): Promise<string> {
    // The policy reaches the API server's admission a moment after it is created.
    return eventually(
      async () => {
        try {
          await write();
          return undefined;
        } catch (err) {
          if (err instanceof ForbiddenError) return (err as Error).message;
          throw err;
        }
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "a 403 from the API server" },
    );
  }

  it("cannot change a ConfigMap it did not make (e.g. aws-auth), though RBAC lets it update ConfigMaps", async () => {
    const live = await kubefn.get(Resources.ConfigMap, { namespace: victims, name: "aws-auth" });
    const message = await refused(() =>
      kubefn.update(Resources.ConfigMap, { ...live, data: { mapRoles: "- rolearn: attacker" } }),
    );
    expect(message).toMatch(/only objects it made/);
    // Nor take it over by adding kubefn's label in the same update.
    await refused(() =>
      kubefn.update(Resources.ConfigMap, {
        ...live,
        metadata: { ...live.metadata, labels: { "app.kubernetes.io/managed-by": "subpool-operator" } },
      }),
    );
    const after = await admin.get<KubeObject & { data?: Record<string, string> }>(Resources.ConfigMap, {
      namespace: victims,
      name: "aws-auth",
    });
    expect(after.data).toEqual({ k: "v" });
  });

  it("cannot delete a tenant's Pod, though RBAC lets it delete Pods", async () => {
    await refused(() => kubefn.delete(Resources.Pod, { namespace: victims, name: "tenant-app" }));
    expect(
      (await admin.get(Resources.Pod, { namespace: victims, name: "tenant-app" })).metadata.deletionTimestamp,
    ).toBe(undefined);
  });

  it("cannot renew or delete a Lease it did not make (leader election, node heartbeats)", async () => {
    const lease = await kubefn.get(Resources.Lease, { namespace: victims, name: "leader-election" });
    await refused(() =>
      kubefn.update(Resources.Lease, {
        ...lease,
        spec: { holderIdentity: "attacker", leaseDurationSeconds: 3600 },
      }),
    );
    await refused(() => kubefn.delete(Resources.Lease, { namespace: victims, name: "leader-election" }));
    const nodeLeases = await admin.list(Resources.Lease, { namespace: "kube-node-lease" });
    for (const nodeLease of nodeLeases.items) {
      await refused(() =>
        kubefn.delete(Resources.Lease, { namespace: "kube-node-lease", name: nodeLease.metadata.name ?? "" }),
      );
    }
    const after = await admin.get<KubeObject & { spec?: { holderIdentity?: string } }>(Resources.Lease, {
      namespace: victims,
      name: "leader-election",
    });
    expect(after.spec?.holderIdentity).toBe("controller-0");
  });

  it("cannot delete or create a Namespace that is not a SubPool's", async () => {
    await refused(() => kubefn.delete(Resources.Namespace, { name: victims }));
    await refused(() => kubefn.delete(Resources.Namespace, { name: "kube-system" }));
    const message = await refused(() =>
      kubefn.create(Resources.Namespace, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: `evil-${victims}`, labels: { "app.kubernetes.io/managed-by": "subpool-operator" } },
      }),
    );
    expect(message).toMatch(/Namespaces named subpool-\*/);
    // A subpool-* name without the label is refused too.
    await refused(() =>
      kubefn.create(Resources.Namespace, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: `subpool-${victims}` },
      }),
    );
    expect((await admin.get(Resources.Namespace, { name: victims })).metadata.deletionTimestamp).toBe(
      undefined,
    );
  });

  it("cannot create a Pod that runs with a ServiceAccount token or on the host", async () => {
    const labels = { "crawl.kubefn.dev/managed-by": "kubefn" };
    const pod = (name: string, spec: Record<string, unknown>): KubeObject => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: victims, labels },
      spec: { containers: [{ name: "c", image: "registry.example/x:1" }], ...spec },
    });
    await refused(() => kubefn.create(Resources.Pod, pod("token", { serviceAccountName: "default" })));
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("sa", { automountServiceAccountToken: false, serviceAccountName: "admin" }),
      ),
    );
    await refused(() =>
      kubefn.create(Resources.Pod, pod("host", { automountServiceAccountToken: false, hostNetwork: true })),
    );
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("root", {
          automountServiceAccountToken: false,
          volumes: [{ name: "root", hostPath: { path: "/" } }],
        }),
      ),
    );
    // The policy is not a blanket refusal: a labelled, unprivileged Pod is admitted (then removed).
    await kubefn.create(Resources.Pod, pod("fine", { automountServiceAccountToken: false }));
    await kubefn.delete(Resources.Pod, { namespace: victims, name: "fine" });
  });

  it("cannot read what RBAC does not grant: Secrets by list, Deployments outside its namespace", async () => {
    await expect(kubefn.list(Resources.Secret, { namespace: victims })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(kubefn.list(Resources.Secret)).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      kubefn.create(Resources.Deployment, {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "miner", namespace: victims, labels: { "unbounded-cloud.io/site": "x" } },
        spec: {},
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
  });
});

describe("the audit policy sends no workload bodies off the API server", () => {
  const deployment = (namespace: string, name: string): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            { name: "c", image: "registry.example/x:1", env: [{ name: "DB_PASSWORD", value: "hunter2" }] },
          ],
        },
      },
    },
  });

  it("a tenant's Deployment is audited at Metadata; only kubefn-system's come with their body", async () => {
    const { next } = await auditEventsSince();
    const name = `audit-${Date.now().toString(36)}`;
    await admin.create(Resources.Deployment, deployment(victims, name));
    await admin.create(Resources.Deployment, deployment("kubefn-system", name));
    const match = (namespace: string) => (e: AuditEvent) =>
      e.verb === "create" &&
      e.objectRef?.resource === "deployments" &&
      e.objectRef.namespace === namespace &&
      e.objectRef.name === name;
    const tenantEvent = await waitForAuditEvent(match(victims), { since: next });
    expect(tenantEvent.level).toBe("Metadata");
    expect(JSON.stringify(tenantEvent)).not.toContain("hunter2");
    const ownEvent = await waitForAuditEvent(match("kubefn-system"), { since: next });
    expect(ownEvent.level).toBe("RequestResponse");
    await admin.delete(Resources.Deployment, { namespace: "kubefn-system", name });
  });
});

describe("the relay's identity", () => {
  it("may only read, only the kinds the relay watches, and never Secrets", async () => {
    const { parseAllDocuments } = await import("yaml");
    const { serverSideApply } = await import("../../shared/kube/index.ts");
    const { defaultRelayKinds } = await import("../../infra/relay/main.ts");
    const kinds: Record<string, (typeof Resources)[keyof typeof Resources]> = {
      Namespace: Resources.Namespace,
      ServiceAccount: Resources.ServiceAccount,
      ClusterRole: Resources.ClusterRole,
      ClusterRoleBinding: Resources.ClusterRoleBinding,
    };
    const text = readFileSync(`${repo}infra/relay/manifests.yaml`, "utf8");
    for (const doc of parseAllDocuments(text)) {
      const obj = doc.toJSON() as KubeObject | null;
      const res = obj ? kinds[obj.kind] : undefined;
      if (obj && res) await serverSideApply(admin, res, obj, "kubefn-installer", true);
    }
    const relayUser = "system:serviceaccount:kubefn-system:kubefn-relay";
    const { table, grants } = await canIList(relayUser);
    console.log(`kubectl auth can-i --list --as=${relayUser}\n${table}`);
    const watched = new Set(
      defaultRelayKinds().map((k) =>
        k.resource.group ? `${k.resource.resource}.${k.resource.group}` : k.resource.resource,
      ),
    );
    const own = grants.filter((g) => !grantedToEveryone(g));
    expect(own.length).toBeGreaterThan(0);
    expect(own.filter((g) => g.verbs.some((v) => !["get", "list", "watch"].includes(v)))).toEqual([]);
    expect(own.map((g) => g.resource).filter((r) => !watched.has(r))).toEqual([]);
    expect(own.some((g) => g.resource === "secrets")).toBe(false);
  });
});
