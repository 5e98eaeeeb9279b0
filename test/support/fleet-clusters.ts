/**
 * The clusters of a fleet test (issue 35): devclusters of the file's own, each prepared as a
 * cluster kubefn reconciles (CRDs, RBAC, admission policies, `default` opted in, the operators'
 * allow-lists, and on request the SubPool's platform prerequisites), the `KUBEFN_CLUSTERS` entry
 * that reaches each as kubefn's ServiceAccount, and the objects a fleet test reconciles in every
 * cluster. The Node host's, the Worker's and Lambda's fleet tests and the clusters bench share them.
 */
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { allowListEntriesFor, applyAllowLists, optInNamespace } from "../../functions/node/install.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { createKube, type Kube, type KubeObject, type Resource } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually, functionsKubeconfig } from "../e2e/host.ts";
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

/** One cluster of a fleet test as a bare-token client has it: kubefn's token, server and CA. */
export interface FleetCluster extends FleetTestCluster {
  /** kubefn-system/kubefn's kubeconfig (the same file as `kubefnKubeconfig`). */
  kubeconfig: string;
  /** kubefn-system/kubefn's ServiceAccount token, and its server and CA as the kubeconfig has them. */
  token: string;
  server: string;
  ca: string;
}

/**
 * Starts a devcluster for each of `names`, side by side, each with the SubPool's platform
 * prerequisites. Caveats: the caller closes each `devcluster` (in its afterAll) of those
 * `started` named, also when this throws for another.
 */
export async function startFleetClusters(
  names: readonly string[],
  started: (cluster: Pick<FleetCluster, "name" | "devcluster">) => void,
): Promise<FleetCluster[]> {
  return Promise.all(
    names.map(async (name) => {
      const cluster = await startFleetCluster(name, { subPoolPlatform: true });
      started(cluster);
      const kc = loadKubeConfig({ file: cluster.kubefnKubeconfig });
      const server = kc.getCurrentCluster();
      return {
        ...cluster,
        kubeconfig: cluster.kubefnKubeconfig,
        token: kc.getCurrentUser()?.token ?? "",
        server: server?.server ?? "",
        ca: Buffer.from(server?.caData ?? "", "base64").toString(),
      };
    }),
  );
}

const example = (file: string) =>
  parseAllDocuments(readFileSync(`${root}examples/${file}`, "utf8")).map((d) => d.toJS() as KubeObject);

/**
 * The objects a fleet test reconciles in each cluster: an External Proxy probed through
 * `forwardProxy` (its probe URL `target`), the example SubPool and the example Site; each name
 * ends in `suffix`.
 */
export function fleetObjects(
  suffix: string,
  probe: { forwardProxyPort: number; targetPort: number },
): [Resource, KubeObject][] {
  const [pool] = example("subpool-internal.yaml") as [KubeObject];
  const [site] = example("site.yaml") as [KubeObject];
  return [
    [proxyResource, externalProxy(`edge${suffix}`, probe.forwardProxyPort, probe.targetPort)],
    [subPoolResource, { ...pool, metadata: { name: `pool${suffix}` } }],
    [siteResource, { ...site, metadata: { name: `lab${suffix}` } }],
  ];
}

/** `o`'s Ready condition's status; throws its conditions while it is not True (a timeout names them). */
export async function readyOf(admin: Kube, res: Resource, o: KubeObject): Promise<string> {
  const { namespace, name } = o.metadata;
  const got = await admin.get(res, { ...(namespace ? { namespace } : {}), name: name ?? "" });
  const conditions = (got.status as { conditions?: { type: string; status: string }[] } | undefined)
    ?.conditions;
  const ready = conditions?.find((c) => c.type === "Ready");
  if (ready?.status !== "True") throw new Error(JSON.stringify(conditions ?? got.status ?? null));
  return ready.status;
}

/** Waits until every one of `objects` in `cluster` is Ready. */
export async function allReady(
  cluster: Pick<FleetCluster, "name" | "admin">,
  objects: readonly [Resource, KubeObject][],
  timeoutMs = 180_000,
): Promise<void> {
  for (const [res, o] of objects) {
    await eventually(
      `${cluster.name}: ${o.kind} ${o.metadata.name} Ready`,
      async () => ((await readyOf(cluster.admin, res, o)) === "True" ? true : undefined),
      timeoutMs,
    );
  }
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
