/**
 * The functions' identity as an attacker would use it: the kubefn ServiceAccount's token taken
 * outside kubefn. Its effective permissions are printed (`kubectl auth can-i --list` as the
 * identity) and every verb must be one the code calls; every write outside kubefn's own objects is
 * refused by the API server itself (RBAC, then the ValidatingAdmissionPolicy).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { asServiceAccount, optInNamespace, serviceAccountToken } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { newLease } from "../../shared/controllers/proxy/leases/lease.ts";
import { buildPod } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import { nameFromUID, ownerTags } from "../../shared/controllers/proxy/providers/provider.ts";
import { poolLabels } from "../../shared/controllers/subpool/desired.ts";
import { grantSubPoolObjects, subPoolObjectsRole } from "../../shared/controllers/subpool/grant.ts";
import {
  createEventRecorder,
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
import { removeNamespaces, waitForDefaultServiceAccount } from "../support/namespaces.ts";

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
  // The admission gate: kubefn reconciles only while its admission policies are installed and bound.
  {
    resource: "validatingadmissionpolicies.admissionregistration.k8s.io",
    verbs: ["list"],
    at: [["shared/app/admission/check.ts", "listAll(kube, ValidatingAdmissionPolicies)"]],
  },
  {
    resource: "validatingadmissionpolicybindings.admissionregistration.k8s.io",
    verbs: ["list"],
    at: [["shared/app/admission/check.ts", "listAll(kube, ValidatingAdmissionPolicyBindings)"]],
  },
  // Proxy operator.
  {
    resource: "proxies.crawl.kubefn.dev",
    verbs: ["get", "list", "patch"],
    at: [
      ["shared/runtime/pass/executor.ts", "ctx.kube.get(def.for"],
      ["shared/controllers/proxy/discovery/list-proxies.ts", "listAll(reads.kube, proxyResource"],
      ["shared/runtime/pass/finalize.ts", "kube.patch(res, keyOf(object)"],
    ],
  },
  {
    resource: "proxies.crawl.kubefn.dev/status",
    verbs: ["patch"],
    at: [
      ["shared/runtime/pass/executor.ts", "ctx.kube.patchStatus(def.for"],
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
    resource: "rolebindings.rbac.authorization.k8s.io",
    verbs: ["create"],
    at: [["shared/controllers/subpool/grant.ts", "kube.create(Resources.RoleBinding"]],
  },
  {
    resource: "clusterroles.rbac.authorization.k8s.io",
    verbs: ["bind"],
    at: [["shared/controllers/subpool/grant.ts", 'subPoolObjectsRole = "kubefn-subpool-objects"']],
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
      ["shared/controllers/proxy/leases/sweep-task.ts", "pagesOf(ctx.kube, Resources.Lease"],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.create<ProxyLease>(leaseResource"],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.update<ProxyLease>("],
      ["shared/controllers/proxy/leases/store.ts", "ctx.kube.delete("],
      // The Node host replicas' sweep Lease.
      ["shared/runtime/sweep/sweep-lease.ts", "kube.get<SweepLeaseObject>(Resources.Lease"],
      ["shared/runtime/sweep/sweep-lease.ts", "kube.create<SweepLeaseObject>("],
      ["shared/runtime/sweep/sweep-lease.ts", "kube.update<SweepLeaseObject>(Resources.Lease"],
    ],
  },
  // SubPool operator.
  {
    resource: "subpools.subrelay.example.com",
    verbs: ["get", "list", "patch"],
    at: [
      ["shared/runtime/pass/executor.ts", "ctx.kube.get(def.for"],
      ["shared/runtime/definition/drift.ts", "const page = await kube.list(resource"],
      ["shared/runtime/pass/finalize.ts", "kube.patch(res, keyOf(object)"],
    ],
  },
  {
    resource: "subpools.subrelay.example.com/status",
    verbs: ["patch"],
    at: [["shared/runtime/pass/executor.ts", "ctx.kube.patchStatus(def.for"]],
  },
  {
    resource: "namespaces",
    verbs: ["get", "list", "create", "update", "delete"],
    at: [
      // The sweep's one SubPool drift list: the pools' Namespaces, metadata-only.
      ["shared/controllers/subpool/drift.ts", "resource: Resources.Namespace, metadataOnly: true"],
      ["shared/kube/ensure.ts", "kube.get<T>(res, key)"],
      ["shared/kube/ensure.ts", "kube.create<T>("],
      ["shared/kube/ensure.ts", "kube.update<T>(res, next"],
      ["shared/controllers/subpool/deletion.ts", "ctx.kube.delete("],
    ],
  },
  // What a SubPool derives, only in a Namespace kubefn made and bound kubefn-subpool-objects in:
  // read by name, created or updated (ensureObject), never listed.
  ...["configmaps", "serviceaccounts", "services", "resourcequotas"].map((resource) => ({
    resource,
    verbs: ["get", "create", "update"],
    at: [
      ["shared/kube/ensure.ts", "kube.get<T>(res, key)"],
      ["shared/kube/ensure.ts", "kube.create<T>("],
      ["shared/kube/ensure.ts", "kube.update<T>(res, next"],
    ] as Array<[string, string]>,
  })),
  {
    resource: "limitranges",
    verbs: ["list", "delete"],
    at: [
      ["shared/controllers/subpool/reconcile.ts", "listAll(kube, Resources.LimitRange"],
      ["shared/controllers/subpool/reconcile.ts", "deleteIfPresent(kube, Resources.LimitRange"],
    ],
  },
  ...["statefulsets.apps", "networkpolicies.networking.k8s.io", "poddisruptionbudgets.policy"].map(
    (resource) => ({
      resource,
      verbs: ["get", "create", "update"],
      at: [
        ["shared/kube/ensure.ts", "kube.get<T>(res, key)"],
        ["shared/kube/ensure.ts", "kube.create<T>("],
        ["shared/kube/ensure.ts", "kube.update<T>(res, next"],
      ] as Array<[string, string]>,
    }),
  ),
  {
    resource: "httproutes.gateway.networking.k8s.io",
    verbs: ["get", "create", "update", "delete"],
    at: [
      ["shared/controllers/subpool/reconcile.ts", "ensureObject(\n        kube,\n        httpRouteResource"],
      ["shared/controllers/subpool/reconcile.ts", "deleteIfPresent(kube, httpRouteResource"],
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
      ["shared/runtime/pass/executor.ts", "ctx.kube.get(def.for"],
      ["shared/controllers/site/env.ts", "listAll(kube, siteResource"],
    ],
  },
  {
    resource: "sites.unbounded-cloud.io/status",
    verbs: ["patch"],
    at: [["shared/runtime/pass/executor.ts", "ctx.kube.patchStatus(def.for"]],
  },
  ...["configmaps", "serviceaccounts", "deployments.apps"].map((resource) => ({
    resource,
    // create: a server-side apply of an object that does not exist yet is a create. list: the
    // Site drift lists in the operator namespace (ConfigMaps, Deployments).
    verbs: ["get", "create", "patch", "delete", ...(resource === "serviceaccounts" ? [] : ["list"])],
    at: [
      ["shared/controllers/site/env.ts", "kube.get(res, keyOf(obj))"],
      ["shared/controllers/site/env.ts", "serverSideApply(kube, res, obj"],
      ["shared/controllers/site/env.ts", "await kube.delete("],
      ...(resource === "serviceaccounts"
        ? []
        : [["shared/controllers/site/drift.ts", "namespace: settings.namespace"]]),
    ] as Array<[string, string]>,
  })),
];

/** The kinds a SubPool derives inside its Namespace (kubefn-subpool-objects), as can-i names them. */
const subPoolKinds = [
  "secrets",
  "configmaps",
  "serviceaccounts",
  "services",
  "resourcequotas",
  "limitranges",
  "statefulsets.apps",
  "networkpolicies.networking.k8s.io",
  "poddisruptionbudgets.policy",
  "httproutes.gateway.networking.k8s.io",
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

/** Waits until kubefn's binding of kubefn-subpool-objects in `namespace` is in force (RBAC caches). */
async function inForce(kube: Kube, namespace: string): Promise<void> {
  await eventually(
    async () =>
      kube.get(Resources.ConfigMap, { namespace, name: "absent" }).then(
        () => true,
        (err: unknown) => (err instanceof ForbiddenError ? undefined : true),
      ),
    { timeoutMs: 15_000, intervalMs: 100, what: `kubefn's grant in ${namespace} in force` },
  );
}

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()));
  kubefn = await kubefnKube(admin);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: victims },
  });
  // kubefn's own shapes are shown admitted where the namespace opted in.
  await optInNamespace(admin, victims);
  await waitForDefaultServiceAccount(admin, victims);
});

afterAll(async () => {
  if (admin) await removeNamespaces(admin, [victims], { dropFinalizers: true });
}, 180_000);

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
    // Never: list/watch Secrets, any "*", escalate/bind/impersonate, but bind on exactly the
    // ClusterRole of what a SubPool derives (the admission policy pins where and to whom).
    const flat = [...clusterWide.grants, ...inOwnNamespace.grants].flatMap((g) =>
      g.verbs.map(
        (v) => `${v} ${g.resource}${g.resourceNames.length ? ` [${g.resourceNames.join(" ")}]` : ""}`,
      ),
    );
    // (The verbs escalate, bind and impersonate, not resources whose names contain them, such as
    // validatingadmissionpolicybindings, which kubefn lists for its admission gate.)
    expect(
      flat.filter(
        (s) =>
          /^(list|watch) secrets$|\*|^(escalate|bind|impersonate) /.test(s) &&
          s !== "bind clusterroles.rbac.authorization.k8s.io [kubefn-subpool-objects]",
      ),
    ).toEqual([]);
    // A tenant namespace's Secrets and Pods only where it opted in: nothing of them cluster-wide.
    expect(clusterWide.grants.filter((g) => ["secrets", "pods"].includes(g.resource))).toEqual([]);
    // What a SubPool derives: nothing of it cluster-wide, nor in a tenant's namespace (issue 30,
    // Medium 5); only in a SubPool's Namespace, through the binding kubefn makes there.
    expect(clusterWide.grants.filter((g) => subPoolKinds.includes(g.resource))).toEqual([]);
    const inTenant = await canIList(kubefnUser, victims);
    // (Its Secrets by name are the Proxy operator's, the tenant having opted in: kubefn-tenant.)
    expect(
      inTenant.grants.filter((g) => g.resource !== "secrets" && subPoolKinds.includes(g.resource)),
    ).toEqual([]);
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

describe("what kubefn must still do under the policy", () => {
  it("counts a repeated Event into its series (the Event's patch is kubefn's own write)", async () => {
    const errors: unknown[] = [];
    const recorder = createEventRecorder(kubefn, {
      controller: "kubefn.dev/proxy",
      now: () => new Date(),
      onError: (err) => errors.push(err),
    });
    const regarding: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "subject", namespace: victims, uid: "00000000-0000-4000-8000-000000000001" },
    };
    const event = { type: "Warning" as const, reason: "ProbeFailed", action: "Probe", note: "twice" };
    await recorder.record(regarding, event);
    await recorder.record(regarding, event);
    expect(errors.map(String)).toEqual([]);
    const events = await admin.list<KubeObject & { series?: { count?: number } }>(Resources.Event, {
      namespace: victims,
    });
    expect(events.items.map((e) => e.series?.count)).toEqual([2]);
  });

  it("cannot patch an Event it did not report", async () => {
    await admin.create(Resources.Event, {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: "someone-elses", namespace: victims },
      eventTime: "2026-11-30T12:00:00.000000Z",
      type: "Normal",
      reason: "Scheduled",
      action: "Binding",
      reportingController: "default-scheduler",
      reportingInstance: "scheduler-0",
      regarding: { apiVersion: "v1", kind: "Pod", namespace: victims, name: "x" },
    } as KubeObject);
    await expect(
      kubefn.patch(
        Resources.Event,
        { namespace: victims, name: "someone-elses" },
        { type: "merge", body: { metadata: { annotations: { forged: "true" } } } },
      ),
    ).rejects.toBeInstanceOf(ForbiddenError);
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

  it("cannot read or change a ConfigMap outside a SubPool's Namespace (e.g. aws-auth): RBAC grants it none", async () => {
    await expect(
      kubefn.get(Resources.ConfigMap, { namespace: victims, name: "aws-auth" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    const live = await admin.get(Resources.ConfigMap, { namespace: victims, name: "aws-auth" });
    const message = await refused(() =>
      kubefn.update(Resources.ConfigMap, { ...live, data: { mapRoles: "- rolearn: attacker" } }),
    );
    expect(message).toMatch(/cannot update resource "configmaps"/);
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

  it("cannot create a ConfigMap others read by name where it is missing (kube-system/aws-auth on EKS with access entries)", async () => {
    // The label check alone admits a new object: kubefn "made" it. Outside its own namespaces
    // kubefn makes only proxy instances, their cloud-init Secrets and proxy Leases.
    const labels = { "crawl.kubefn.dev/managed-by": "kubefn" };
    await refused(() =>
      kubefn.create(Resources.ConfigMap, {
        ...configMap("aws-auth", "kube-system", labels),
        data: { mapRoles: "- rolearn: arn:aws:iam::111122223333:role/attacker\n  groups: [system:masters]" },
      }),
    );
    // A kind RBAC grants it where a tenant opted in: the policy refuses it there.
    const message = await refused(() =>
      kubefn.create(Resources.Secret, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "registry-credentials", namespace: victims, labels },
        type: "Opaque",
      }),
    );
    expect(message).toMatch(/proxy instances/);
    await expect(
      admin.get(Resources.ConfigMap, { namespace: "kube-system", name: "aws-auth" }),
    ).rejects.toThrow(/not found/i);
  });

  it("cannot delete a tenant's Pod, though RBAC lets it delete Pods", async () => {
    await refused(() => kubefn.delete(Resources.Pod, { namespace: victims, name: "tenant-app" }));
    expect(
      (await admin.get(Resources.Pod, { namespace: victims, name: "tenant-app" })).metadata.deletionTimestamp,
    ).toBe(undefined);
  });

  it("cannot delete a tenant's site-aware Pod: the Site label marks kubefn's objects only in kubefn-system", async () => {
    // Per-Site workloads of other operators carry unbounded-cloud.io/site too.
    await admin.create(Resources.Pod, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "site-aware", namespace: victims, labels: { "unbounded-cloud.io/site": "lab" } },
      spec: { containers: [{ name: "app", image: "registry.example/app:1" }] },
    });
    await refused(() => kubefn.delete(Resources.Pod, { namespace: victims, name: "site-aware" }));
    expect(
      (await admin.get(Resources.Pod, { namespace: victims, name: "site-aware" })).metadata.deletionTimestamp,
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
    // The pod provider's own Pod (named and labelled for a Proxy UID) with the fields under test.
    const uidOf = (name: string) => {
      const hex = Buffer.from(name).toString("hex").padEnd(32, "0").slice(0, 32);
      return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    };
    const pxName = (name: string) => nameFromUID(uidOf(name));
    const pod = (name: string, spec: Record<string, unknown>): KubeObject => {
      const built = buildPod({
        name: pxName(name),
        namespace: victims,
        instance: {},
        tags: ownerTags(uidOf(name)),
      });
      return { ...built, spec: { ...built.spec, ...spec } };
    };
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("token", { serviceAccountName: "default", automountServiceAccountToken: undefined }),
      ),
    );
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
    // Nor through the fields beside `containers` and `hostPath`: a privileged init container,
    // added capabilities, or a ServiceAccount token mounted as a projected volume.
    const noToken = { automountServiceAccountToken: false };
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("init", {
          ...noToken,
          initContainers: [
            { name: "i", image: "registry.example/x:1", securityContext: { privileged: true } },
          ],
        }),
      ),
    );
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("caps", {
          ...noToken,
          containers: [
            {
              name: "c",
              image: "registry.example/x:1",
              securityContext: { capabilities: { add: ["SYS_ADMIN"] } },
            },
          ],
        }),
      ),
    );
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("projected", {
          ...noToken,
          volumes: [{ name: "t", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } }],
        }),
      ),
    );
    // Nor mount a tenant's data: a PersistentVolumeClaim (or any volume but a Secret, ConfigMap,
    // emptyDir or downward API) in the tenant's namespace.
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("pvc", {
          ...noToken,
          volumes: [{ name: "data", persistentVolumeClaim: { claimName: "tenant-database" } }],
        }),
      ),
    );
    await refused(() =>
      kubefn.create(
        Resources.Pod,
        pod("nfs", { ...noToken, volumes: [{ name: "n", nfs: { server: "203.0.113.5", path: "/" } }] }),
      ),
    );
    // The policy is not a blanket refusal: the pod provider's Pod is admitted (then removed).
    await kubefn.create(Resources.Pod, pod("fine", {}));
    await kubefn.delete(Resources.Pod, { namespace: victims, name: pxName("fine") });
  });

  it("cannot mint a ServiceAccount token by creating a token Secret, though RBAC lets it create and get Secrets", async () => {
    // The token controller fills a `kubernetes.io/service-account-token` Secret with a
    // long-lived token for the ServiceAccount it names; kubefn may `get` Secrets, so this would
    // hand the stolen token any ServiceAccount's rights (kube-system's controllers' included).
    const tokenSecret = (namespace: string): KubeObject => ({
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: "px-0123456789abcdef0123-cloud-init",
        namespace,
        labels: { "crawl.kubefn.dev/managed-by": "kubefn" },
        annotations: { "kubernetes.io/service-account.name": "default" },
      },
      type: "kubernetes.io/service-account-token",
    });
    const message = await refused(() => kubefn.create(Resources.Secret, tokenSecret(victims)));
    expect(message).toMatch(/Opaque/);
    await refused(() => kubefn.create(Resources.Secret, tokenSecret("kube-system")));
    await expect(
      admin.get(Resources.Secret, { namespace: victims, name: "px-0123456789abcdef0123-cloud-init" }),
    ).rejects.toThrow(/not found/i);
  });

  it("cannot write a SubPool's kinds outside a SubPool's Namespace, nor run a privileged StatefulSet in one", async () => {
    const labels = { "app.kubernetes.io/managed-by": "subpool-operator" };
    const statefulSet = (name: string, namespace: string, podSpec: Record<string, unknown>): KubeObject => ({
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name, namespace, labels },
      spec: {
        serviceName: name,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: "c", image: "registry.example/x:1" }], ...podSpec },
        },
      },
    });
    // A StatefulSet runs Pods as the workload controller, past the Pod rule: in a tenant's
    // namespace it could use any of that namespace's ServiceAccounts.
    const message = await refused(() =>
      kubefn.create(Resources.StatefulSet, statefulSet("miner", victims, { serviceAccountName: "admin" })),
    );
    // Refused by RBAC: kubefn holds the SubPool kinds only in a SubPool's Namespace.
    expect(message).toMatch(/cannot create resource "statefulsets"/);
    await refused(() =>
      kubefn.create(Resources.NetworkPolicy, {
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        metadata: { name: "deny-all", namespace: victims, labels },
        spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] },
      }),
    );
    await refused(() =>
      kubefn.create(Resources.ResourceQuota, {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: { name: "zero", namespace: victims, labels },
        spec: { hard: { pods: "0" } },
      }),
    );
    // Inside a SubPool's Namespace, its Pods are held to the Pod rule's host and privilege limits.
    const pool = `subpool-${victims}`;
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: pool, labels: { ...labels, "subrelay.example.com/pool": victims } },
    });
    try {
      // kubefn's own grant there, in force before the shapes are tried: the refusals below are the
      // policy's, not RBAC's.
      await grantSubPoolObjects(kubefn, pool, poolLabels(victims));
      await inForce(kubefn, pool);
      await refused(() =>
        kubefn.create(
          Resources.StatefulSet,
          statefulSet("host", pool, { volumes: [{ name: "root", hostPath: { path: "/" } }] }),
        ),
      );
      await refused(() =>
        kubefn.create(
          Resources.StatefulSet,
          statefulSet("priv", pool, {
            containers: [{ name: "c", image: "registry.example/x:1", securityContext: { privileged: true } }],
          }),
        ),
      );
      await refused(() =>
        kubefn.create(Resources.StatefulSet, statefulSet("net", pool, { hostNetwork: true })),
      );
      // A Service with externalIPs would take over traffic to those addresses cluster-wide
      // (CVE-2020-8554); a SubPool's Services never set them.
      await refused(() =>
        kubefn.create(Resources.Service, {
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: "mitm", namespace: pool, labels },
          spec: { ports: [{ port: 443 }], externalIPs: ["203.0.113.10"] },
        }),
      );
      // (What the SubPool operator derives is admitted: security-stolen-token.test.ts, attack 6.)
      const all = await admin.list(Resources.StatefulSet, { namespace: victims });
      expect(all.items).toEqual([]);
    } finally {
      await admin.delete(Resources.Namespace, { name: pool }).catch(() => {});
    }
  });

  it("cannot start a workload that runs as kubefn (or the relay): a stolen token would outlive its expiry", async () => {
    const deployment = (name: string, serviceAccountName: string): KubeObject => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace: "kubefn-system", labels: { "unbounded-cloud.io/site": "x" } },
      spec: {
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { serviceAccountName, containers: [{ name: "c", image: "registry.example/x:1" }] },
        },
      },
    });
    const message = await refused(() => kubefn.create(Resources.Deployment, deployment("persist", "kubefn")));
    expect(message).toMatch(/ServiceAccount/);
    await refused(() => kubefn.create(Resources.Deployment, deployment("persist-relay", "kubefn-relay")));
  });

  it("cannot edit a tenant's Proxy spec (e.g. point crawlers at its own endpoint), though it patches Proxies' metadata", async () => {
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "tenant-proxy", namespace: victims },
      spec: { mode: "External", endpoint: { host: "proxy.tenant.example", port: 3128 } },
    });
    const key = { namespace: victims, name: "tenant-proxy" };
    const message = await refused(() =>
      kubefn.patch(proxyResource, key, {
        type: "merge",
        body: { spec: { endpoint: { host: "attacker.example", port: 8080 } } },
      }),
    );
    expect(message).toMatch(/spec/);
    // What kubefn does write on its primaries, metadata, still goes through.
    await kubefn.patch(proxyResource, key, {
      type: "merge",
      body: { metadata: { annotations: { "crawl.kubefn.dev/spec-hash": "x" } } },
    });
    const after = await admin.get<KubeObject & { spec?: { endpoint?: { host?: string } } }>(
      proxyResource,
      key,
    );
    expect(after.spec?.endpoint?.host).toBe("proxy.tenant.example");
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

/**
 * Issue 30, Medium 5: the kinds a SubPool derives (ConfigMaps, StatefulSets, Services,
 * ServiceAccounts, NetworkPolicies, …) are kubefn's only inside a SubPool's Namespace, through the
 * RoleBinding of kubefn-subpool-objects kubefn makes there — never cluster-wide, so a stolen token
 * neither lists them across the cluster nor reads them in a tenant's namespace, and it cannot make
 * that binding anywhere but in a Namespace carrying kubefn's pool labels.
 */
describe("the kubefn token and the kinds a SubPool derives", () => {
  const id = `grant-${Date.now().toString(36)}`;
  const own = `subpool-${id}`;
  const squat = `subpool-squat-${id}`;
  const derived = [
    Resources.ConfigMap,
    Resources.StatefulSet,
    Resources.Service,
    Resources.ServiceAccount,
    Resources.NetworkPolicy,
    Resources.Secret,
    Resources.ResourceQuota,
    Resources.PodDisruptionBudget,
  ];
  /** The call's 403, or a failure of the test when the API server let it through. */
  const refusal = async (call: () => Promise<unknown>): Promise<string> =>
    eventually(
      async () => {
        try {
          await call();
          return undefined;
        } catch (err) {
          if (err instanceof ForbiddenError) return (err as Error).message;
          throw err;
        }
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "a 403 from the API server" },
    );

  afterAll(async () => {
    if (admin) await removeNamespaces(admin, [own, squat], { dropFinalizers: true });
  }, 180_000);

  it("cannot list ConfigMaps, StatefulSets, Services, ServiceAccounts or NetworkPolicies cluster-wide, nor read them in a tenant's namespace", async () => {
    await admin.create(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "tenant-settings", namespace: victims },
      data: { dsn: "postgres://tenant:hunter2@db" },
    });
    for (const res of derived) {
      await expect(kubefn.list(res), `list ${res.resource} cluster-wide`).rejects.toBeInstanceOf(
        ForbiddenError,
      );
      await expect(
        kubefn.list(res, { namespace: victims }),
        `list ${res.resource} in ${victims}`,
      ).rejects.toBeInstanceOf(ForbiddenError);
      await expect(
        kubefn.list(res, { namespace: "kube-system" }),
        `list ${res.resource} in kube-system`,
      ).rejects.toBeInstanceOf(ForbiddenError);
    }
    // Metadata-only lists are refused alike: RBAC does not tell them apart.
    await expect(kubefn.list(Resources.ConfigMap, { metadataOnly: true })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(
      kubefn.get(Resources.ConfigMap, { namespace: victims, name: "tenant-settings" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      kubefn.get(Resources.ConfigMap, {
        namespace: "kube-system",
        name: "extension-apiserver-authentication",
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    // Namespaces are the one kind it lists cluster-wide: metadata-only, as the sweep asks.
    const namespaces = await kubefn.list(Resources.Namespace, { metadataOnly: true, limit: 1 });
    // (The API server answers a PartialObjectMetadataList: names, labels, owners, no spec or status.)
    expect(namespaces.items[0]?.metadata.name).toBeTruthy();
    expect(namespaces.items[0]?.status).toBeUndefined();
  });

  it("cannot bind itself kubefn-subpool-objects in a namespace it did not label, nor label one to make it a SubPool's", async () => {
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: squat },
    });
    for (const namespace of [victims, "kube-system", "default", "kubefn-system", squat]) {
      const message = await refusal(() => grantSubPoolObjects(kubefn, namespace, poolLabels(id)));
      expect(message, namespace).toMatch(/subpool-\*/);
    }
    // The name alone is not enough, and kubefn cannot add its labels to a Namespace it did not make.
    const stored = await admin.get(Resources.Namespace, { name: squat });
    await refusal(() =>
      kubefn.update(Resources.Namespace, {
        ...stored,
        metadata: { ...stored.metadata, labels: { ...stored.metadata.labels, ...poolLabels("squat") } },
      }),
    );
    await refusal(() => grantSubPoolObjects(kubefn, squat, poolLabels("squat")));
    // Nor bind any other role there, to itself or to another subject.
    await refusal(() =>
      kubefn.create(Resources.RoleBinding, {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "admin", namespace: victims, labels: poolLabels(id) },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "admin" },
        subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
      }),
    );
    for (const namespace of [victims, squat, "kube-system"]) {
      const bindings = await admin.list(Resources.RoleBinding, { namespace });
      expect(bindings.items.map((b) => b.metadata.name)).not.toContain(subPoolObjectsRole);
    }
  });

  it("binds it in a Namespace it made, and there alone reads and writes what the pool derives (still no list)", async () => {
    await kubefn.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: own, labels: poolLabels(id) },
    });
    await expect(kubefn.get(Resources.ConfigMap, { namespace: own, name: "absent" })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await grantSubPoolObjects(kubefn, own, poolLabels(id));
    await inForce(kubefn, own);
    const inPool = await canIList(kubefnUser, own);
    console.log(`kubectl auth can-i --list --as=${kubefnUser} -n ${own}\n${inPool.table}`);
    for (const kind of [
      "configmaps",
      "statefulsets.apps",
      "services",
      "serviceaccounts",
      "networkpolicies.networking.k8s.io",
    ]) {
      expect(inPool.grants.find((g) => g.resource === kind)?.verbs.sort(), kind).toEqual([
        "create",
        "get",
        "update",
      ]);
    }
    await expect(kubefn.list(Resources.ConfigMap, { namespace: own })).rejects.toBeInstanceOf(ForbiddenError);
    // Its grant there does not reach the next Namespace.
    await expect(
      kubefn.get(Resources.ConfigMap, { namespace: victims, name: "tenant-settings" }),
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
      if (obj && res && obj.kind !== "Namespace") {
        // The relay's identity exists only for this test: later files (the CLI's install dry run)
        // count what an install would create.
        const existed = await admin
          .get(res, { namespace: obj.metadata.namespace, name: obj.metadata.name! })
          .then(
            () => true,
            () => false,
          );
        await serverSideApply(admin, res, obj, "kubefn-installer", true);
        if (!existed) {
          onTestFinished(() =>
            admin
              .delete(res, { namespace: obj.metadata.namespace, name: obj.metadata.name! })
              .then(() => undefined),
          );
        }
      }
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

/**
 * The intake's own identity (AWS Lambda's public function): whoever takes the public function
 * holds this token, not kubefn's. It may do what the HTTP surface calls (read Proxies, SubPools
 * and Sites; keep the crawlers' proxy-* Leases; acknowledge the doctor's canary with an Event) and
 * nothing else: no Pod, no Secret, no status, no Proxy, no other Lease (issue 30, Low).
 */
describe("the kubefn-intake token used outside kubefn", () => {
  const intakeUser = "system:serviceaccount:kubefn-system:kubefn-intake";
  let intake: Kube;

  beforeAll(async () => {
    const token = await serviceAccountToken(
      createNodeTransport(kubeConfig()),
      "kubefn-system",
      "kubefn-intake",
    );
    intake = createKube(createNodeTransport(asServiceAccount(kubeConfig(), token)), {
      fieldManager: "kubefn-intake",
    });
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: "intake-victim", namespace: victims },
      spec: { mode: "External", endpoint: { host: "proxy.tenant.example", port: 3128 } },
    });
    await admin.create(Resources.Lease, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "intake-leader-election", namespace: victims },
      spec: { holderIdentity: "controller-0", leaseDurationSeconds: 15 },
    });
  });

  /** The write fails with 403 (RBAC at once; the admission policy a moment after it is made). */
  const refused = (write: () => Promise<unknown>): Promise<string> =>
    eventually(
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

  it("prints its permissions: reads of the primaries, Leases and Event creation, nothing else", async () => {
    const { table, grants } = await canIList(intakeUser);
    console.log(`kubectl auth can-i --list --as=${intakeUser}\n${table}`);
    const own = grants
      .filter((g) => !grantedToEveryone(g))
      .map((g) => `${g.resource} ${[...g.verbs].sort().join(",")}`)
      .sort();
    expect(own).toEqual([
      "events.events.k8s.io create",
      "leases.coordination.k8s.io create,delete,get,update",
      "proxies.crawl.kubefn.dev get,list",
      "sites.unbounded-cloud.io list",
      "subpools.subrelay.example.com list",
    ]);
  });

  it("cannot write a Pod, a Secret, a Proxy or a Proxy's status", async () => {
    await expect(
      intake.create(Resources.Pod, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "px-00000000000000000000", namespace: victims },
        spec: { containers: [{ name: "app", image: "registry.example/miner:1" }] },
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      intake.create(Resources.Secret, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "px-00000000000000000000-cloud-init", namespace: victims },
        type: "Opaque",
        stringData: { x: "y" },
      } as KubeObject),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      intake.get(Resources.Secret, { namespace: victims, name: "anything" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    const key = { namespace: victims, name: "intake-victim" };
    await expect(
      intake.patchStatus(proxyResource, key, {
        type: "merge",
        body: { status: { ip: "203.0.113.66", phase: "Ready" } },
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      intake.patch(proxyResource, key, {
        type: "merge",
        body: { spec: { endpoint: { host: "attacker.example", port: 8080 } } },
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      intake.create(proxyResource, {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { name: "forged", namespace: victims },
        spec: { mode: "External", endpoint: { host: "attacker.example", port: 8080 } },
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    const after = await admin.get<KubeObject & { spec?: { endpoint?: { host?: string } }; status?: unknown }>(
      proxyResource,
      key,
    );
    expect(after.spec?.endpoint?.host).toBe("proxy.tenant.example");
    expect(after.status).toBeUndefined();
  });

  it("cannot take a Lease that is not a crawler's (e.g. leader election), though RBAC lets it update Leases", async () => {
    const live = await admin.get<KubeObject & { spec: Record<string, unknown> }>(Resources.Lease, {
      namespace: victims,
      name: "intake-leader-election",
    });
    const message = await refused(() =>
      intake.update(Resources.Lease, { ...live, spec: { ...live.spec, holderIdentity: "attacker" } }),
    );
    expect(message).toMatch(/kubefn's intake\) writes only labelled proxy-\* Leases/);
    await expect(
      refused(() =>
        intake.create(Resources.Lease, {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name: "proxy-unlabelled", namespace: victims },
          spec: { holderIdentity: "attacker" },
        }),
      ),
    ).resolves.toMatch(/proxy-unlabelled/);
  });

  it("keeps a crawler's Lease and acknowledges a canary, as the crawler API and intake do", async () => {
    const proxy = await admin.get<KubeObject>(proxyResource, { namespace: victims, name: "intake-victim" });
    const lease = newLease(
      { namespace: victims, name: "intake-victim", uid: proxy.metadata.uid ?? "" },
      "crawler-1",
      30,
      new Date(),
    );
    const made = await eventually(
      () =>
        intake.create(Resources.Lease, lease as KubeObject).catch((err) => {
          if (err instanceof ForbiddenError) return undefined;
          throw err;
        }),
      { timeoutMs: 15_000, intervalMs: 250, what: "the intake's Lease admitted" },
    );
    expect(made.metadata.name).toBe("proxy-intake-victim");
    await intake.delete(Resources.Lease, { namespace: victims, name: "proxy-intake-victim" });
    const errors: unknown[] = [];
    await createEventRecorder(intake, {
      controller: "kubefn.dev/intake",
      now: () => new Date(),
      onError: (err) => errors.push(err),
    }).record(
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { namespace: victims, name: "kubefn-intake-canary-x" },
      },
      { type: "Normal", reason: "IntakeReceived", action: "Receive", note: "received" },
    );
    expect(errors.map(String)).toEqual([]);
    // An Event as one of the operators is refused.
    const forged: unknown[] = [];
    await createEventRecorder(intake, {
      controller: "kubefn.dev/proxy",
      now: () => new Date(),
      onError: (err) => forged.push(err),
    }).record(
      { apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: victims, name: "anything" } },
      { type: "Warning", reason: "Forged", action: "Forge", note: "forged" },
    );
    expect(forged.map((e) => e instanceof ForbiddenError)).toEqual([true]);
  });
});
