/**
 * The lane's devcluster as a Worker test starts from: kubefn's CRDs and RBAC installed, kubefn's
 * ServiceAccount token for the Worker's `KUBE_TOKEN`, and a namespace of the test's own, opted in
 * to kubefn (unless `optIn: false`). `kube` is the admin's, for what the test sets up and reads.
 */
import { installCrdsAndRbac, optInNamespace, serviceAccountToken } from "../../functions/node/install.ts";
import { createFetchTransport, createKube, type Kube, Resources } from "../../shared/kube/index.ts";
import { clusterInfo } from "../setup/cluster.ts";

export interface WorkerCluster {
  kube: Kube;
  /** The devcluster's plain-HTTP pass-through: the Worker's `KUBE_SERVER`. */
  httpProxy: string;
  workerToken: string;
}

export async function workerCluster(
  namespace: string,
  options: { optIn?: boolean } = {},
): Promise<WorkerCluster> {
  const { httpProxy, adminToken } = clusterInfo();
  const admin = createFetchTransport({ server: httpProxy, token: adminToken });
  const kube = createKube(admin, { fieldManager: "kubefn-e2e" });
  await installCrdsAndRbac(kube);
  const workerToken = await serviceAccountToken(admin, "kubefn-system", "kubefn");
  await kube.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  if (options.optIn ?? true) await optInNamespace(kube, namespace);
  return { kube, httpProxy, workerToken };
}
