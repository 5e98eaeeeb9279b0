/**
 * Tenants for the security suite: ServiceAccounts standing in for people, bound to the built-in
 * `edit` or `view` ClusterRoles in one namespace (plus, where an attack needs it, the Proxy
 * permissions an installation might hand out), each with its own token and Kube.
 */
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import {
  createKube,
  ForbiddenError,
  isAlreadyExists,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { kubeConfig } from "../setup/cluster.ts";

export const kubefnUser = "system:serviceaccount:kubefn-system:kubefn";

export async function createIfAbsent(
  kube: Kube,
  res: (typeof Resources)[keyof typeof Resources],
  obj: KubeObject,
) {
  try {
    await kube.create(res, obj);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/** The admin's Kube. */
export function adminKube(): Kube {
  return createKube(createNodeTransport(kubeConfig()));
}

/**
 * Installs CRDs, RBAC and the admission policy; returns a Kube acting as the kubefn ServiceAccount
 * once the API server enforces the policy (it takes effect a moment after it is created).
 */
export async function kubefnKube(admin: Kube): Promise<Kube> {
  await installCrdsAndRbac(admin);
  const token = await serviceAccountToken(createNodeTransport(kubeConfig()), "kubefn-system", "kubefn");
  const kubefn = createKube(createNodeTransport(asServiceAccount(kubeConfig(), token)), {
    fieldManager: "kubefn",
  });
  await policyEnforced(kubefn, admin);
  return kubefn;
}

/** Waits until an unlabelled write as kubefn is refused (403), undoing any that got through. */
async function policyEnforced(kubefn: Kube, admin: Kube): Promise<void> {
  const probe: KubeObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `policy-probe-${Date.now().toString(36)}`, namespace: "kubefn-system" },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await kubefn.create(Resources.ConfigMap, probe);
      await admin.delete(Resources.ConfigMap, {
        namespace: "kubefn-system",
        name: probe.metadata.name ?? "",
      });
    } catch (err) {
      if (err instanceof ForbiddenError) return;
      throw err;
    }
    if (Date.now() > deadline) throw new Error("the admission policy is not enforced after 30 s");
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface TenantOptions {
  namespace: string;
  name: string;
  /** The built-in ClusterRole bound in `namespace`. */
  clusterRole: "edit" | "view";
  /** Extra rules in `namespace` (e.g. proxies/status for an attacker who may write it). */
  rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }>;
}

/** A ServiceAccount bound as described, and a Kube acting as it. */
export async function tenant(admin: Kube, opts: TenantOptions): Promise<Kube> {
  const { namespace, name } = opts;
  await createIfAbsent(admin, Resources.ServiceAccount, {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name, namespace },
  });
  const subjects = [{ kind: "ServiceAccount", name, namespace }];
  await createIfAbsent(admin, Resources.RoleBinding, {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: `${name}-${opts.clusterRole}`, namespace },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: opts.clusterRole },
    subjects,
  });
  if (opts.rules) {
    await createIfAbsent(admin, Resources.Role, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: `${name}-extra`, namespace },
      rules: opts.rules,
    });
    await createIfAbsent(admin, Resources.RoleBinding, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: `${name}-extra`, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: `${name}-extra` },
      subjects,
    });
  }
  const token = await serviceAccountToken(createNodeTransport(kubeConfig()), namespace, name);
  return createKube(createNodeTransport(asServiceAccount(kubeConfig(), token)));
}
