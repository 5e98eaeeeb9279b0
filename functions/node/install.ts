import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { DEFAULT_IDENTITY, withIdentities } from "../../shared/app/admission/index.ts";
import { type AllowListEntry, allowListEntriesFor, allowListNames } from "../../shared/app/index.ts";
import type { Kube, KubeObject, Resource, Transport } from "../../shared/kube/index.ts";
import { errorFromResponse, isNotFound, Resources, serverSideApply } from "../../shared/kube/index.ts";

const infra = fileURLToPath(new URL("../../infra/", import.meta.url));

const installable: Record<string, Resource> = {
  CustomResourceDefinition: Resources.CustomResourceDefinition,
  Namespace: Resources.Namespace,
  ConfigMap: Resources.ConfigMap,
  ServiceAccount: Resources.ServiceAccount,
  ClusterRole: Resources.ClusterRole,
  ClusterRoleBinding: Resources.ClusterRoleBinding,
  Role: Resources.Role,
  RoleBinding: Resources.RoleBinding,
  ValidatingAdmissionPolicy: {
    group: "admissionregistration.k8s.io",
    version: "v1",
    resource: "validatingadmissionpolicies",
    kind: "ValidatingAdmissionPolicy",
    namespaced: false,
  },
  ValidatingAdmissionPolicyBinding: {
    group: "admissionregistration.k8s.io",
    version: "v1",
    resource: "validatingadmissionpolicybindings",
    kind: "ValidatingAdmissionPolicyBinding",
    namespaced: false,
  },
};

/** Every object in the YAML files of `infra/<folder>`, in file order. */
export async function manifestsIn(folder: string): Promise<KubeObject[]> {
  const dir = `${infra}${folder}`;
  const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
  const objects: KubeObject[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(`${dir}/${file}`, "utf8"))) {
      const obj = doc.toJSON() as KubeObject | null;
      if (obj?.kind) objects.push(obj);
    }
  }
  return objects;
}

/**
 * Server-side applies kubefn's CRDs (`infra/crds`) and RBAC (`infra/rbac`), then waits until
 * every CRD is Established. `identities` (the setting `SELF_USERNAMES`; default the
 * ServiceAccount) are the usernames the admission policies contain and the status writers list
 * (`withIdentities`). Idempotent; the field manager is "kubefn-installer".
 */
export async function installCrdsAndRbac(
  kube: Kube,
  timeoutMs = 60_000,
  identities: readonly string[] = [DEFAULT_IDENTITY],
): Promise<{ crds: number; rbac: number }> {
  const crds = await manifestsIn("crds");
  const rbac = withIdentities(await manifestsIn("rbac"), identities);
  for (const obj of [...crds, ...rbac]) {
    const res = installable[obj.kind];
    if (!res) throw new Error(`installer does not know kind ${obj.kind} (${obj.metadata.name})`);
    await serverSideApply(kube, res, obj, "kubefn-installer", true);
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      try {
        const got = await kube.get<
          KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }
        >(Resources.CustomResourceDefinition, { name: crd.metadata.name! });
        if (got.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      if (Date.now() > deadline)
        throw new Error(`CRD ${crd.metadata.name} not Established in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return { crds: crds.length, rbac: rbac.length };
}

/** The ClusterRole of what kubefn reads and writes inside a tenant namespace (infra/rbac/kubefn.yaml). */
export const tenantRole = "kubefn-tenant";

const tenantSubject = { kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" };
const tenantRoleRef = { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: tenantRole };

/**
 * Opts `namespace` in: binds ClusterRole kubefn-tenant to kubefn-system/kubefn there, as a
 * namespace's admin does with `kubectl create rolebinding kubefn-tenant -n <namespace>
 * --clusterrole=kubefn-tenant --serviceaccount=kubefn-system:kubefn`. Idempotent.
 *
 * @example
 * await optInNamespace(admin, "team-a");
 */
export async function optInNamespace(kube: Kube, namespace: string): Promise<void> {
  await serverSideApply(
    kube,
    Resources.RoleBinding,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: tenantRole, namespace },
      roleRef: tenantRoleRef,
      subjects: [tenantSubject],
    },
    "kubefn-installer",
    true,
  );
}

/**
 * Binds kubefn-tenant cluster-wide (ClusterRoleBinding kubefn-tenant): the explicit choice of an
 * install that lets kubefn read every namespace's Secrets and Pods (the chart's
 * clusterWideTenantAccess: true; the embedded devcluster of `npm start`). Idempotent.
 */
export async function bindTenantAccessClusterWide(kube: Kube): Promise<void> {
  await serverSideApply(
    kube,
    Resources.ClusterRoleBinding,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: tenantRole },
      roleRef: tenantRoleRef,
      subjects: [tenantSubject],
    },
    "kubefn-installer",
    true,
  );
}

/**
 * Lets `username` write what kubefn reads back as its own record (the status of every
 * operator's primaries, their spec-hash annotations): adds it, under `key`, to the ConfigMap
 * kubefn-system/kubefn-status-writers that the admission policy `kubefn-state-is-kubefns` reads.
 * For a kubefn run under another identity than its ServiceAccount (a development cluster's admin).
 * Idempotent; applied with a field manager of its own, so the installer's re-applies keep it.
 *
 * @example
 * await trustAsKubefn(admin, "devcluster-admin", "admin");
 */
export async function trustAsKubefn(kube: Kube, key: string, username: string): Promise<void> {
  const manager = `kubefn-status-writer-${key}`;
  await serverSideApply(
    kube,
    Resources.Namespace,
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "kubefn-system" } },
    manager,
  );
  await serverSideApply(
    kube,
    Resources.ConfigMap,
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "kubefn-status-writers", namespace: "kubefn-system" },
      data: { [key]: username },
    },
    manager,
  );
}

/**
 * Adds one entry, under `key`, to an allow-list ConfigMap in kubefn-system (an image pattern, or
 * a hostname claim): what an installer does with `kubectl patch`. `list` is one an operator
 * declares (its `allowLists.names`). Idempotent; applied with a field
 * manager of its own, so the installer's re-applies keep it.
 *
 * @example
 * await allowForKubefn(admin, "kubefn-widget-images", "team-registry", "registry.example/widget:*");
 */
export async function allowForKubefn(kube: Kube, list: string, key: string, value: string): Promise<void> {
  if (!allowListNames().includes(list)) throw new TypeError(`${list} is no operator's allow-list`);
  const manager = `kubefn-allow-${key}`;
  await serverSideApply(
    kube,
    Resources.Namespace,
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "kubefn-system" } },
    manager,
  );
  await serverSideApply(
    kube,
    Resources.ConfigMap,
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: list, namespace: "kubefn-system" },
      data: { [key]: value },
    },
    manager,
  );
}

/** One entry of an installer's allow-list. */
export type PolicyAllowEntry = AllowListEntry;

export { allowListEntriesFor };

/**
 * Applies `entries` to the allow-lists, each list's under one field manager
 * (`kubefn-host-allow`), so an entry the settings no longer ask for is dropped; other installers'
 * entries stay. Lists without an entry are left alone.
 */
export async function applyAllowLists(kube: Kube, entries: readonly PolicyAllowEntry[]): Promise<void> {
  const lists = new Map<string, Record<string, string>>();
  for (const e of entries) lists.set(e.list, { ...lists.get(e.list), [e.key]: e.value });
  for (const [name, data] of lists) {
    await serverSideApply(
      kube,
      Resources.ConfigMap,
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "kubefn-system" }, data },
      "kubefn-host-allow",
      true,
    );
  }
}

/** A short-lived token for a ServiceAccount, through the TokenRequest API. */
export async function serviceAccountToken(
  transport: Transport,
  namespace: string,
  name: string,
  expirationSeconds = 24 * 3600,
): Promise<string> {
  const res = await transport.request({
    method: "POST",
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
    contentType: "application/json",
    body: JSON.stringify({
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds },
    }),
  });
  if (res.status !== 201 && res.status !== 200) throw errorFromResponse(res);
  return (JSON.parse(res.body) as { status: { token: string } }).status.token;
}

/** The admin kubeconfig's cluster, with a ServiceAccount token as the user. */
export function asServiceAccount(admin: KubeConfig, token: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: "kubefn", token }],
    contexts: [{ name: "kubefn", cluster: cluster.name, user: "kubefn" }],
    currentContext: "kubefn",
  });
  return kc;
}
