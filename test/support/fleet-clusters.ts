/**
 * A fleet of devclusters for the fleet tests (issue 35): each a devcluster of the file's own with
 * kubefn installed (CRDs, RBAC, admission policies, the allow-lists of the default settings), the
 * `default` namespace opted in and the SubPool's platform prerequisites applied; kubefn's
 * ServiceAccount's kubeconfig and token for each. The Node host, the Worker and the Lambda fleet
 * tests share them, and the objects each reconciles in every cluster.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
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
import { type OwnDevcluster, startOwnDevcluster } from "./own-devcluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** One cluster of the fleet, kubefn installed. */
export interface FleetCluster {
  name: string;
  devcluster: OwnDevcluster;
  /** The cluster's admin, for the test's own reads and writes. */
  admin: Kube;
  /** kubefn-system/kubefn's kubeconfig (a file of the test run's temporary root). */
  kubeconfig: string;
  /** kubefn-system/kubefn's ServiceAccount token, and its server and CA as the kubeconfig has them. */
  token: string;
  server: string;
  ca: string;
}

/**
 * Starts a devcluster for each of `names`, side by side, kubefn installed in each.
 * Caveats: the caller closes each `devcluster` (in its afterAll), also when this throws for one.
 */
export async function startFleetClusters(
  names: readonly string[],
  started: (cluster: Pick<FleetCluster, "name" | "devcluster">) => void,
): Promise<FleetCluster[]> {
  return Promise.all(
    names.map(async (name) => {
      const devcluster = await startOwnDevcluster([]);
      started({ name, devcluster });
      const admin = createKube(createNodeTransport(loadKubeConfig({ file: devcluster.kubeconfig })), {
        fieldManager: "fleet-test",
      });
      // CRDs, RBAC and admission policies, and kubefn's ServiceAccount's kubeconfig.
      const kubeconfig = await functionsKubeconfig(devcluster.kubeconfig);
      await optInNamespace(admin, "default");
      await applyAllowLists(admin, allowListEntriesFor(parseNodeHostEnv({}).settings.operators));
      // The SubPool's platform prerequisites: the shared proxy gateway and the Gateway.
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
      const kc = loadKubeConfig({ file: kubeconfig });
      const cluster = kc.getCurrentCluster();
      return {
        name,
        devcluster,
        admin,
        kubeconfig,
        token: kc.getCurrentUser()?.token ?? "",
        server: cluster?.server ?? "",
        ca: Buffer.from(cluster?.caData ?? "", "base64").toString(),
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
    [
      proxyResource,
      {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: "default", name: `edge${suffix}` },
        spec: {
          mode: "External",
          endpoint: { host: "127.0.0.1", port: probe.forwardProxyPort, scheme: "http" },
          healthCheck: {
            probeURL: `http://127.0.0.1:${probe.targetPort}/`,
            intervalSeconds: 5,
            successThreshold: 1,
            failureThreshold: 1,
          },
        },
      },
    ],
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
