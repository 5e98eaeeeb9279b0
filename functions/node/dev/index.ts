import type { KubeConfig } from "@kubernetes/client-node";
import type { Log } from "../../../shared/app/index.ts";
import { createKube } from "../../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../../shared/kube/node.ts";
import {
  applyAllowLists,
  asServiceAccount,
  bindTenantAccessClusterWide,
  installCrdsAndRbac,
  type PolicyAllowEntry,
  serviceAccountToken,
} from "../install.ts";
import { type Devcluster, startDevcluster } from "./devcluster.ts";

export {
  type Devcluster,
  type DevclusterInfo,
  type DevclusterOptions,
  startDevcluster,
} from "./devcluster.ts";

/**
 * `npm start` with no cluster given: the embedded devcluster, its audit webhook pointed at
 * `auditWebhookUrl`, with kubefn's CRDs and RBAC installed and `allowEntries` in the admission
 * policies' allow-lists (see allowListEntriesFor) and kubefn-tenant bound cluster-wide, reconciled
 * as kubefn's least-privileged `kubefn-system/kubefn` ServiceAccount.
 */
export async function startDevclusterAsKubefn(
  auditWebhookUrl: string,
  auditToken: string | undefined,
  log: Log,
  allowEntries: readonly PolicyAllowEntry[] = [],
): Promise<{ kc: KubeConfig; devcluster: Devcluster }> {
  log.info("starting the devcluster (embedded etcd, kube-apiserver, controllers, simulated node)");
  const devcluster = await startDevcluster({ auditWebhookUrl, auditWebhookToken: auditToken });
  const { server, version, kubeconfig } = devcluster.info;
  log.info("cluster up", { server, version, kubeconfig });
  const admin = loadKubeConfig({ file: kubeconfig });
  const adminKube = createKube(createNodeTransport(admin));
  log.info("CRDs and RBAC installed", await installCrdsAndRbac(adminKube));
  // A development cluster of one user: kubefn may read every namespace (the explicit choice an
  // install makes with clusterWideTenantAccess; tenants of a shared cluster opt in one by one).
  await bindTenantAccessClusterWide(adminKube);
  // What the host's settings ask kubefn to run and serve, in the policies' allow-lists.
  await applyAllowLists(adminKube, allowEntries);
  const token = await serviceAccountToken(createNodeTransport(admin), "kubefn-system", "kubefn");
  log.info("reconciling as system:serviceaccount:kubefn-system:kubefn");
  return { kc: asServiceAccount(admin, token), devcluster };
}
