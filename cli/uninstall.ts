/**
 * `kubefn uninstall`: removes kubefn from the current cluster in the one order that leaves nothing
 * hanging.
 *
 * 1. **kubefn's objects** (every Proxy, SubPool, Site and Machine): deleted while kubefn still runs,
 *    so its finalizers do their work — a Proxy's instance, a SubPool's Namespace, a Site's
 *    components — and come off. Waits for them to be gone.
 * 2. **the rest**, once they are: the in-cluster host and the relay, kubefn's RBAC (bindings
 *    first: its identity can do nothing from then on), the admission policies, the tenant
 *    namespaces' `kubefn-tenant` RoleBindings, the Namespace kubefn-system (with every Secret and
 *    ConfigMap an installer made there), and last the CRDs. Waits for each to be gone.
 *
 * Caveats: when an object of step 1 is still there at the timeout (kubefn is not running, or
 * cannot finish), nothing of step 2 is touched — kubefn's access and containment stay, so that a
 * kubefn started again can finish — and the result names each object and its finalizers. A
 * finalizer removed by hand abandons what kubefn made for that object (an instance, a Namespace).
 */
import { hostObjects, installObjects, relayObjects } from "../install/index.ts";
import { ApiError, type Cluster, type KubeObject } from "./cluster.ts";

/** Everything any install of this release makes (cluster side, host, relay), in install order. */
export function uninstallObjects(root: string, version: string): KubeObject[] {
  return [
    ...installObjects(root, version),
    ...hostObjects(root, version),
    ...relayObjects(root, version),
  ] as KubeObject[];
}

type Crd = KubeObject & {
  spec: {
    group: string;
    names: { plural: string; kind: string };
    versions: Array<{ name: string; storage?: boolean }>;
  };
};

type Listed = KubeObject & {
  metadata: KubeObject["metadata"] & { finalizers?: string[]; deletionTimestamp?: string };
};

/** The outcome: every line to print, and whether nothing of kubefn is left. */
export interface UninstallResult {
  ok: boolean;
  lines: string[];
}

const describe = (o: Pick<KubeObject, "kind" | "metadata">) =>
  `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata.name}`;

/** The rank of a kind in step 2: processes, then access, then containment, then the rest. */
const removalOrder = [
  ["Deployment", "StatefulSet", "DaemonSet", "PodDisruptionBudget", "Service"],
  ["ClusterRoleBinding", "RoleBinding"],
  ["ClusterRole", "Role", "ServiceAccount"],
  ["ValidatingAdmissionPolicyBinding"],
  ["ValidatingAdmissionPolicy"],
  ["ConfigMap", "Secret"],
  ["Namespace"],
  ["CustomResourceDefinition"],
];
const rankOf = (kind: string) => {
  const i = removalOrder.findIndex((kinds) => kinds.includes(kind));
  return i === -1 ? removalOrder.length - 3 : i;
};

/** The objects of `crds`' kinds in the cluster, cluster-wide (a CRD not installed has none). */
async function customObjects(cluster: Cluster, crds: Crd[]): Promise<Listed[]> {
  const found: Listed[] = [];
  for (const crd of crds) {
    const version = (crd.spec.versions.find((v) => v.storage) ?? crd.spec.versions[0])?.name;
    if (!version) continue;
    try {
      const list = await cluster.call<{ items: Listed[] }>(
        "GET",
        `/apis/${crd.spec.group}/${version}/${crd.spec.names.plural}`,
      );
      for (const item of list.items)
        found.push({ ...item, apiVersion: `${crd.spec.group}/${version}`, kind: crd.spec.names.kind });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  }
  return found;
}

/** Tenant namespaces' RoleBindings of kubefn's ClusterRoles (`kubefn-tenant`, `kubefn-subpool-objects`). */
async function tenantBindings(cluster: Cluster, roles: Set<string>): Promise<KubeObject[]> {
  const list = await cluster.call<{ items: Array<KubeObject & { roleRef: { kind: string; name: string } }> }>(
    "GET",
    "/apis/rbac.authorization.k8s.io/v1/rolebindings",
  );
  return list.items
    .filter((b) => b.roleRef.kind === "ClusterRole" && roles.has(b.roleRef.name))
    .map((b) => ({ ...b, apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding" }));
}

/** DELETE `o` (its dependents in the background); false when it was not there. */
async function remove(cluster: Cluster, o: KubeObject): Promise<boolean> {
  try {
    const base = await cluster.pathOf(o.apiVersion, o.kind, o.metadata.namespace);
    await cluster.call("DELETE", `${base}/${encodeURIComponent(o.metadata.name)}`, {
      apiVersion: "v1",
      kind: "DeleteOptions",
      propagationPolicy: "Background",
    });
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return false;
    throw err;
  }
}

/** Polls `left` until it returns nothing or `timeoutSeconds` pass; returns what is left. */
async function waitGone<T>(left: () => Promise<T[]>, timeoutSeconds: number): Promise<T[]> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const now = await left();
    if (now.length === 0 || Date.now() >= deadline) return now;
    await new Promise((r) => setTimeout(r, 500));
  }
}

const withFinalizers = (o: Listed) =>
  `${describe(o)}${o.metadata.finalizers?.length ? ` (finalizers: ${o.metadata.finalizers.join(", ")})` : ""}`;

/**
 * Removes `objects` (what {@link uninstallObjects} lists) and everything of their CRDs' kinds from
 * `cluster`, in the order of this module's comment.
 *
 * @example
 * const result = await uninstall(currentCluster(), uninstallObjects(root, version), { timeoutSeconds: 300 });
 */
export async function uninstall(
  cluster: Cluster,
  objects: KubeObject[],
  opts: { timeoutSeconds: number },
): Promise<UninstallResult> {
  const lines: string[] = [];
  const crds = objects.filter((o): o is Crd => o.kind === "CustomResourceDefinition");

  const owned = await customObjects(cluster, crds);
  for (const o of owned) if (await remove(cluster, o)) lines.push(`deleted   ${describe(o)}`);
  const hanging = await waitGone(() => customObjects(cluster, crds), opts.timeoutSeconds);
  if (hanging.length > 0) {
    lines.push(
      ...hanging.map((o) => `hanging   ${withFinalizers(o)}`),
      `${hanging.length} of kubefn's objects still there after ${opts.timeoutSeconds} s: their finalizers are kubefn's to remove, and kubefn did not (is it running? kubefn doctor). Nothing else was removed, so kubefn can still finish. Start it and run kubefn uninstall again; or abandon what kubefn made for one (its instance, its Namespace) with kubectl patch <kind> <name> --type merge -p '{"metadata":{"finalizers":null}}'`,
    );
    return { ok: false, lines };
  }
  if (owned.length > 0) lines.push(`gone      ${owned.length} of kubefn's objects (their finalizers ran)`);

  const roles = new Set(objects.filter((o) => o.kind === "ClusterRole").map((o) => o.metadata.name));
  const extra: KubeObject[] = [
    // Bound by the chart's clusterWideTenantAccess, or by the embedded devcluster's host.
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "kubefn-tenant" },
    },
    ...(await tenantBindings(cluster, roles)),
  ];
  const seen = new Set<string>();
  const rest = [...objects, ...extra]
    .filter((o) => {
      const key = describe(o);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rankOf(a.o.kind) - rankOf(b.o.kind) || a.i - b.i)
    .map(({ o }) => o);
  const removed: KubeObject[] = [];
  for (const o of rest) {
    if (await remove(cluster, o)) {
      removed.push(o);
      lines.push(`deleted   ${describe(o)}`);
    }
  }
  const left = await waitGone(async () => {
    const there: Listed[] = [];
    for (const o of rest) {
      const got = await cluster.get<Listed>(o);
      if (got) there.push({ ...got, apiVersion: o.apiVersion, kind: o.kind });
    }
    return there;
  }, opts.timeoutSeconds);
  if (left.length > 0) {
    lines.push(
      ...left.map((o) => `hanging   ${withFinalizers(o)}`),
      `${left.length} object(s) still there after ${opts.timeoutSeconds} s (a Namespace waits for what is in it, a CRD for its objects): kubectl describe each`,
    );
    return { ok: false, lines };
  }
  lines.push(`nothing of kubefn is left: ${owned.length + removed.length} objects removed`);
  return { ok: true, lines };
}

/** The command's output. */
export const formatUninstall = (r: UninstallResult): string => r.lines.join("\n");
