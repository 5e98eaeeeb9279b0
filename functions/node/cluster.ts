import type { KubeConfig } from "@kubernetes/client-node";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Log } from "../../shared/runtime/index.ts";
import type { NodeHostConfig } from "./config.ts";
import { type Devcluster, startDevcluster } from "./devcluster.ts";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "./install.ts";

/**
 * The Node host's cluster: the given one (installing CRDs and RBAC if asked), or the embedded
 * devcluster with its audit webhook pointed at `url`, as kubefn's least-privileged
 * `kubefn-system/kubefn` ServiceAccount.
 */
export async function connectCluster(
  config: NodeHostConfig,
  url: string,
  auditToken: string | undefined,
  log: Log,
): Promise<{ kc: KubeConfig; devcluster?: Devcluster }> {
  if (config.kubeconfig) {
    const kc = loadKubeConfig({ file: config.kubeconfig });
    if (config.install) log.info("installed", await installCrdsAndRbac(createKube(createNodeTransport(kc))));
    return { kc };
  }
  log.info("starting the devcluster (embedded etcd, kube-apiserver, controllers, simulated node)");
  const devcluster = await startDevcluster({
    auditWebhookUrl: `${url}/v1/events`,
    auditWebhookToken: auditToken,
  });
  const { server, version, kubeconfig } = devcluster.info;
  log.info("cluster up", { server, version, kubeconfig });
  const admin = loadKubeConfig({ file: kubeconfig });
  log.info("CRDs and RBAC installed", await installCrdsAndRbac(createKube(createNodeTransport(admin))));
  const token = await serviceAccountToken(createNodeTransport(admin), "kubefn-system", "kubefn");
  log.info("reconciling as system:serviceaccount:kubefn-system:kubefn");
  return { kc: asServiceAccount(admin, token), devcluster };
}

/** A fresh bearer token for the embedded devcluster's audit webhook (48 hex digits). */
export function randomToken(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}
