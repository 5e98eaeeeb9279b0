import { hostname } from "node:os";
import type { KubefnPorts } from "../../shared/app/index.ts";
import {
  type ClusterDeclaration,
  clusterLog,
  clusterMetrics,
  createKubefn,
  createSweepLease,
  type FleetMember,
  fleetFetch,
  type Log,
  messageKey,
  type PrometheusMetrics,
  reconcileResults,
} from "../../shared/app/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { ApiGuard } from "../../shared/kube/index.ts";
import { guardedNodeKube } from "../../shared/kube/node.ts";
import { connectDeclaredCluster, randomToken } from "./cluster.ts";
import type { NodeHostConfig } from "./config.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { startSweeper } from "./sweeper.ts";
import { WorkQueue } from "./work-queue.ts";

/** Deliveries of one message before the Node host drops it, as a queue's `max_retries` + 1. */
const MAX_DELIVERIES = 4;

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
  const { kc, tokenSource, namespace } = await connectDeclaredCluster(declared, config, log);
  const { kube, invocationKube, apiFailing, guard } = guardedNodeKube(
    kc,
    settings,
    tokenSource,
    config.kubeHttp,
  );
  const deliveries = new WeakMap<object, number>();
  let consume: ReturnType<typeof createKubefn>["consume"] | undefined;
  const queue: WorkQueue = new WorkQueue({
    concurrency: settings.passConcurrency,
    async handle(message, batch) {
      const attempts = (deliveries.get(message) ?? 0) + 1;
      const [verdict] = (await consume?.([{ body: message, attempts }], { batch })) ?? [];
      if (!verdict || verdict.ack) return;
      if (attempts >= MAX_DELIVERIES) {
        log.error("message dropped after its last delivery; the sweep revisits the object", {
          key: messageKey(message),
          attempts,
        });
        return;
      }
      deliveries.set(message, attempts);
      await queue.send([message], verdict.retryAfterSeconds);
    },
    onError: (err, message) => log.error("pass crashed", { key: messageKey(message), error: String(err) }),
    metrics: clusterMetrics(hostMetrics, cluster),
  });
  const kubefn = createKubefn(settings, {
    cluster,
    kube,
    invocationKube,
    apiFailing,
    queue,
    inProcessQueue: true,
    prober: createNodeProber(),
    log,
    metrics,
    ...shared,
  });
  consume = kubefn.consume;
  for (const controller of kubefn.controllers) {
    for (const result of reconcileResults)
      metrics.count("controller_runtime_reconcile_total", { controller, result }, 0);
    metrics.count("controller_runtime_reconcile_errors_total", { controller }, 0);
  }
  const lease = config.sweepLease
    ? createSweepLease({
        kube,
        namespace: config.sweepLease.namespace ?? namespace ?? "kubefn-system",
        name: config.sweepLease.name,
        holder: `${hostname()}-${randomToken().slice(0, 8)}`,
        durationSeconds: 2 * settings.sweepPeriodSeconds,
        log,
        metrics,
      })
    : undefined;
  const sweeper = startSweeper((full) => kubefn.sweep({ full }), settings.sweepPeriodSeconds, log, lease);
  log.info("reconciling cluster", { server: kc.getCurrentCluster()?.server });
  return {
    member: { cluster, kubefn, credentials },
    cluster: {
      cluster,
      queue,
      guard,
      sweep: sweeper.sweep,
      async stop() {
        await sweeper.stop();
        await queue.close();
      },
    },
  };
}
