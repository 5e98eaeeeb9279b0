import type { KubefnPorts } from "../../shared/app/index.ts";
import {
  type ClusterDeclaration,
  clusterLog,
  clusterMetrics,
  type FleetMember,
  fleetFetch,
  type Log,
  type PrometheusMetrics,
} from "../../shared/app/index.ts";
import type { ApiGuard } from "../../shared/kube/index.ts";
import { connectDeclaredCluster } from "./cluster.ts";
import type { NodeHostConfig } from "./config.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { startReconciler } from "./reconciler.ts";
import type { WorkQueue } from "./work-queue.ts";

/** One declared cluster on the Node host: everything of its own. */
export interface FleetCluster {
  cluster: string;
  queue: WorkQueue;
  guard: ApiGuard;
  sweep(full?: boolean): Promise<void>;
  stop(): Promise<void>;
}

/** What every cluster's kubefn of one host shares. */
export type SharedPorts = Pick<KubefnPorts, "operatorOptions" | "spans" | "stateChanges">;

/** The Node host's fleet: its clusters and the one HTTP surface in front of them. */
export interface Fleet {
  clusters: FleetCluster[];
  fetch: (request: Request) => Promise<Response>;
}

/**
 * Starts a kubefn for each declared cluster (`KUBEFN_CLUSTERS`), each with its own kube client,
 * circuit, request budget, admission gate, work queue and sweep, so that one cluster whose API
 * server is down or whose credential is revoked holds back nothing of the others; their log lines
 * and series carry `cluster`. Clusters connect one after another at start; one that cannot be
 * reached then is said (a warning) and left to its own circuit, holding back none of the others —
 * unless `KUBEFN_INSTALL` asks to install there, which fails the start.
 *
 * Caveats: the list is read once, at start: adding a cluster takes a restart here (Cluster API
 * discovery, which would not, is not built yet).
 */
export async function startFleet(
  config: NodeHostConfig,
  clusters: readonly ClusterDeclaration[],
  metrics: PrometheusMetrics,
  log: Log,
  /** The ports every cluster's kubefn shares: operator options read at start, spans, state changes. */
  shared: SharedPorts = {},
): Promise<Fleet> {
  const started: FleetCluster[] = [];
  const members: FleetMember[] = [];
  try {
    for (const declared of clusters) {
      const { member, cluster } = await startCluster(config, declared, metrics, log, shared);
      started.push(cluster);
      members.push(member);
    }
  } catch (err) {
    await Promise.all(started.map((c) => c.stop()));
    throw err;
  }
  return { clusters: started, fetch: fleetFetch(members) };
}

async function startCluster(
  config: NodeHostConfig,
  declared: ClusterDeclaration,
  hostMetrics: PrometheusMetrics,
  hostLog: Log,
  shared: SharedPorts,
): Promise<{ member: FleetMember; cluster: FleetCluster }> {
  const cluster = declared.name;
  const log = clusterLog(hostLog, cluster);
  const metrics = clusterMetrics(
    config.metricsPerObject ? hostMetrics : withoutObjectSeries(hostMetrics),
    cluster,
  );
  const credentials = {
    ...(declared.auditToken ? { auditToken: declared.auditToken } : {}),
    ...(declared.relaySecret ? { relaySecret: declared.relaySecret } : {}),
  };
  const settings = { ...config.settings, ...credentials };
  const connection = await connectDeclaredCluster(declared, config, log);
  const reconciler = startReconciler({
    config,
    settings,
    connection,
    log,
    metrics,
    queueMetrics: clusterMetrics(hostMetrics, cluster),
    ports: { cluster, ...shared },
  });
  log.info("reconciling cluster", { server: connection.kc.getCurrentCluster()?.server });
  const { kubefn, queue, guard, sweep, stop } = reconciler;
  return {
    member: { cluster, kubefn, credentials },
    cluster: { cluster, queue, guard, sweep, stop },
  };
}
