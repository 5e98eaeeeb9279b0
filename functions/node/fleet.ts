import type { IntakeCredentials, KubefnPorts } from "../../shared/app/index.ts";
import {
  type ClusterDeclaration,
  clusterLog,
  clusterMetrics,
  type FleetMember,
  families,
  fleetFetch,
  type Log,
  type PrometheusMetrics,
} from "../../shared/app/index.ts";
import type { ApiGuard } from "../../shared/kube/index.ts";
import { type ClusterConnection, connectDeclaredCluster } from "./cluster.ts";
import type { NodeHostConfig } from "./config.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { startReconciler } from "./reconciler.ts";
import type { WorkQueue } from "./work-queue.ts";

/** One cluster of the Node host's fleet: everything of its own. */
export interface FleetCluster {
  cluster: string;
  queue: WorkQueue;
  guard: ApiGuard;
  sweep(full?: boolean): Promise<void>;
  stop(): Promise<void>;
}

/** What every cluster's kubefn of one host shares. */
export type SharedPorts = Pick<KubefnPorts, "operatorOptions" | "spans" | "stateChanges">;

/** A cluster to join the fleet while it runs (one discovered from Cluster API). */
export interface JoiningCluster {
  /** A DNS label, unique in the fleet: the `cluster` of its messages, log lines and series. */
  cluster: string;
  credentials: IntakeCredentials;
  /** Connects (and installs, if the host is asked to): called once, by {@link Fleet.add}. */
  connect(): Promise<ClusterConnection>;
}

/**
 * The Node host's fleet: its clusters and the one HTTP surface in front of them. Clusters join
 * ({@link Fleet.add}) and leave ({@link Fleet.remove}) while it runs.
 */
export interface Fleet {
  /** The clusters now reconciled, declared first, in the order they joined. */
  readonly clusters: readonly FleetCluster[];
  fetch: (request: Request) => Promise<Response>;
  /**
   * Starts a cluster's reconciler and routes its intake batches to it.
   *
   * @throws Error when the name is taken, or when the cluster cannot be connected (nothing is left running).
   */
  add(joining: JoiningCluster): Promise<void>;
  /**
   * Stops a cluster's reconciler — its sweep timer cleared, its queue's waiting and delayed
   * messages dropped, its passes in flight let end — then removes its series from `/metrics` and
   * its credentials from intake. A name not in the fleet is ignored.
   */
  remove(cluster: string): Promise<void>;
  /** Stops every cluster. */
  stop(): Promise<void>;
}

/**
 * Starts a kubefn for each declared cluster (`KUBEFN_CLUSTERS`), each with its own kube client,
 * circuit, request budget, admission gate, work queue and sweep, so that one cluster whose API
 * server is down or whose credential is revoked holds back nothing of the others; their log lines
 * and series carry `cluster`. Clusters connect one after another at start; one that cannot be
 * reached then is said (a warning) and left to its own circuit, holding back none of the others —
 * unless `KUBEFN_INSTALL` asks to install there, which fails the start. More clusters join and
 * leave while it runs (Cluster API discovery, cluster-api.ts).
 *
 * Caveats: with no cluster yet (discovery only, nothing discovered), intake and the crawler API
 * answer 503.
 */
export async function startFleet(
  config: NodeHostConfig,
  clusters: readonly ClusterDeclaration[],
  metrics: PrometheusMetrics,
  log: Log,
  /** The ports every cluster's kubefn shares: operator options read at start, spans, state changes. */
  shared: SharedPorts = {},
): Promise<Fleet> {
  const running = new Map<string, { member: FleetMember; cluster: FleetCluster }>();
  let route: ((request: Request) => Promise<Response>) | undefined;
  const reroute = () => {
    const members = [...running.values()].map((r) => r.member);
    route = members.length > 0 ? fleetFetch(members) : undefined;
  };
  const start = async (joining: JoiningCluster) => {
    if (running.has(joining.cluster)) throw new Error(`cluster ${joining.cluster} is in the fleet already`);
    running.set(joining.cluster, await startCluster(config, joining, metrics, log, shared));
    reroute();
  };
  const fleet: Fleet = {
    get clusters() {
      return [...running.values()].map((r) => r.cluster);
    },
    fetch: async (request) =>
      route ? route(request) : Response.json({ error: "no cluster in the fleet yet" }, { status: 503 }),
    add: start,
    async remove(cluster) {
      const member = running.get(cluster);
      if (!member) return;
      running.delete(cluster);
      reroute();
      await member.cluster.stop();
      forgetClusterSeries(metrics, cluster);
      log.info("stopped reconciling cluster", { cluster });
    },
    async stop() {
      const all = [...running.values()];
      running.clear();
      route = undefined;
      await Promise.all(all.map((r) => r.cluster.stop()));
    },
  };
  try {
    for (const declared of clusters) {
      await start({
        cluster: declared.name,
        credentials: {
          ...(declared.auditToken ? { auditToken: declared.auditToken } : {}),
          ...(declared.relaySecret ? { relaySecret: declared.relaySecret } : {}),
        },
        connect: () => connectDeclaredCluster(declared, config, clusterLog(log, declared.name)),
      });
    }
  } catch (err) {
    await fleet.stop();
    throw err;
  }
  return fleet;
}

/** Removes every series a cluster's reconciler and its scrapes wrote (`cluster` = its name). */
function forgetClusterSeries(metrics: PrometheusMetrics, cluster: string): void {
  for (const name of Object.keys(families)) metrics.forget(name, (labels) => labels.cluster === cluster);
}

async function startCluster(
  config: NodeHostConfig,
  joining: JoiningCluster,
  hostMetrics: PrometheusMetrics,
  hostLog: Log,
  shared: SharedPorts,
): Promise<{ member: FleetMember; cluster: FleetCluster }> {
  const { cluster, credentials } = joining;
  const log = clusterLog(hostLog, cluster);
  const metrics = clusterMetrics(
    config.metricsPerObject ? hostMetrics : withoutObjectSeries(hostMetrics),
    cluster,
  );
  const settings = { ...config.settings, ...credentials };
  const connection = await joining.connect();
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
