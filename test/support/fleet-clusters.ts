/**
 * The clusters of a fleet test (issue 35): devclusters of the file's own, each prepared as a
 * cluster kubefn reconciles (CRDs, RBAC, admission policies, `default` opted in, the operators'
 * allow-lists), and the `KUBEFN_CLUSTERS` entry that reaches it as kubefn's ServiceAccount.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { allowListEntriesFor, applyAllowLists, optInNamespace } from "../../functions/node/install.ts";
import { createKube, type Kube, type KubeObject, type Resource } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { functionsKubeconfig } from "../e2e/host.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { outputOf } from "./child-output.ts";
import { type OwnDevcluster, type OwnDevclusterOptions, startOwnDevcluster } from "./own-devcluster.ts";
import { tempDir } from "./temp-dir.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** One cluster of a fleet test. */
export interface FleetTestCluster {
  name: string;
  devcluster: OwnDevcluster;
  /** The cluster's admin, for the test's own objects and checks. */
  admin: Kube;
  /** A kubeconfig of kubefn's ServiceAccount there (`kubefn-system/kubefn`). */
  kubefnKubeconfig: string;
}

/**
 * Starts a devcluster and prepares it for kubefn; with `subPoolPlatform`, also the SubPool's
 * platform prerequisites (examples/subpool-platform.yaml: the shared proxy gateway, the Gateway).
 */
export async function startFleetCluster(
  name: string,
  options: OwnDevclusterOptions & { subPoolPlatform?: boolean } = {},
): Promise<FleetTestCluster> {
  const { subPoolPlatform, ...devclusterOptions } = options;
  const devcluster = await startOwnDevcluster([], devclusterOptions);
  try {
    const admin = createKube(createNodeTransport(loadKubeConfig({ file: devcluster.kubeconfig })), {
      fieldManager: "fleet-test",
    });
    const kubefnKubeconfig = await functionsKubeconfig(devcluster.kubeconfig);
    await optInNamespace(admin, "default");
    await applyAllowLists(admin, allowListEntriesFor(parseNodeHostEnv({}).settings.operators));
    if (subPoolPlatform) {
      const applied = await outputOf(
        spawn(clusterInfo().devclusterBin, [
          "kubectl",
          "--kubeconfig",
          devcluster.kubeconfig,
          "apply",
          "-f",
          `${root}examples/subpool-platform.yaml`,
        ]),
        "",
      );
      if (applied.code !== 0) throw new Error(applied.stderr);
    }
    return { name, devcluster, admin, kubefnKubeconfig };
  } catch (err) {
    await devcluster.close();
    throw err;
  }
}

/** The cluster's `KUBEFN_CLUSTERS` entry by its kubeconfig (`kubeconfig`) or by a bare token, its server and CA (`token`). */
export function declarationOf(
  cluster: FleetTestCluster,
  how: "kubeconfig" | "token",
  intake: { auditToken?: string; relaySecret?: string } = {},
): Record<string, unknown> {
  if (how === "kubeconfig") {
    return {
      name: cluster.name,
      credential: { kind: "kubeconfig", file: cluster.kubefnKubeconfig },
      ...intake,
    };
  }
  const kc = loadKubeConfig({ file: cluster.kubefnKubeconfig });
  const server = kc.getCurrentCluster();
  return {
    name: cluster.name,
    server: server?.server,
    ca: Buffer.from(server?.caData ?? "", "base64").toString(),
    credential: { kind: "token", token: kc.getCurrentUser()?.token },
    ...intake,
  };
}

/**
 * One kubeconfig of the clusters' admins, a context each named after its cluster (what a user of
 * a fleet has, and `kubefn doctor --clusters` reads), plus a context per `unreachable` server.
 */
export function adminContexts(
  clusters: readonly FleetTestCluster[],
  unreachable: Record<string, string> = {},
): string {
  const clustersOf: { name: string; server: string; caData?: string; skipTLSVerify?: boolean }[] = [];
  const users: { name: string; token: string }[] = [];
  for (const c of clusters) {
    const admin = new KubeConfig();
    admin.loadFromFile(c.devcluster.kubeconfig);
    const server = admin.getCurrentCluster();
    clustersOf.push({ name: c.name, server: server?.server ?? "", caData: server?.caData ?? "" });
    users.push({ name: c.name, token: c.devcluster.adminToken });
  }
  for (const [name, server] of Object.entries(unreachable)) {
    clustersOf.push({ name, server, skipTLSVerify: true });
    users.push({ name, token: "nobody" });
  }
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: clustersOf,
    users,
    contexts: clustersOf.map((c) => ({ name: c.name, cluster: c.name, user: c.name })),
    currentContext: clustersOf[0]?.name,
  });
  const file = join(tempDir("kubefn-fleet-").path, "kubeconfig");
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** `Ready` of the object, or a throw saying what it waits for (an `eventually` reports the last). */
export async function readyOf(admin: Kube, res: Resource, o: KubeObject): Promise<string> {
  const { namespace, name } = o.metadata;
  const got = await admin.get(res, { ...(namespace ? { namespace } : {}), name: name ?? "" });
  const conditions = (got.status as { conditions?: { type: string; status: string }[] } | undefined)
    ?.conditions;
  const ready = conditions?.find((c) => c.type === "Ready");
  if (ready?.status !== "True") throw new Error(JSON.stringify(conditions ?? got.status ?? null));
  return ready.status;
}

/** An External Proxy in `default` reached through `forwardPort`, probed at `targetPort` every `intervalSeconds`. */
export function externalProxy(
  name: string,
  forwardPort: number,
  targetPort: number,
  intervalSeconds = 5,
): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "default", name },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: forwardPort, scheme: "http" },
      healthCheck: {
        probeURL: `http://127.0.0.1:${targetPort}/`,
        intervalSeconds,
        successThreshold: 1,
        failureThreshold: 1,
      },
    },
  };
}
