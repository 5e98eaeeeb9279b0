import { hostname } from "node:os";
import {
  createKubefn,
  createSweepLease,
  type Kubefn,
  type KubefnPorts,
  type KubefnSettings,
  type Log,
  type Metrics,
  messageKey,
  reconcileResults,
} from "../../shared/app/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import { type ApiGuard, guardedKube } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { type ClusterConnection, randomToken } from "./cluster.ts";
import type { NodeHostConfig } from "./config.ts";
import { watchCredentialRefusal } from "./credential-refusal.ts";
import { startSweeper } from "./sweeper.ts";
import { WorkQueue } from "./work-queue.ts";

/** Deliveries of one message before the Node host drops it, as a queue's `max_retries` + 1. */
const MAX_DELIVERIES = 4;

/** The ports one cluster's kubefn is given beside its kube, queue, prober, log and metrics. */
export type ReconcilerPorts = Pick<KubefnPorts, "cluster" | "operatorOptions" | "spans" | "stateChanges">;

/** One cluster's reconciler on the Node host. */
export interface Reconciler {
  kubefn: Kubefn;
  queue: WorkQueue;
  guard: ApiGuard;
  sweep(full?: boolean): Promise<void>;
  /** Stops the sweep, then lets the passes in flight end. */
  stop(): Promise<void>;
}

/**
 * A kubefn for one connected cluster, as the Node host runs it: its guarded kube (circuit and
 * request budget), its in-process work queue (a message dropped after {@link MAX_DELIVERIES}
 * deliveries, the sweep revisiting the object), controller-runtime's reconcile series from 0, and
 * its sweep, shared with the host's replicas through a Lease when the configuration names one.
 * The single-cluster host runs one; a fleet one per declared cluster.
 */
export function startReconciler(opts: {
  config: Pick<NodeHostConfig, "kubeHttp" | "sweepLease">;
  settings: KubefnSettings;
  connection: Pick<ClusterConnection, "kc" | "tokenSource" | "namespace">;
  log: Log;
  /** What the passes, the sweep and its Lease count into (object series already bounded). */
  metrics: Metrics;
  /** Where the work queue's series (client-go's workqueue families) go. */
  queueMetrics: Pick<Metrics, "count" | "observe">;
  ports: ReconcilerPorts;
}): Reconciler {
  const { config, settings, connection, log, metrics } = opts;
  // Each pass is an invocation of its own (its own request budget); the passes of one queue send
  // (an intake batch, a sweep shard) share reads, as a platform's queue batch does (`batch`).
  // A retried message is sent again as the same object: its deliveries are counted by identity.
  const deliveries = new WeakMap<object, number>();
  let consume: Kubefn["consume"] | undefined;
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
    metrics: opts.queueMetrics,
  });
  const transport = createNodeTransport(connection.kc, {
    timeoutMs: settings.kubeTimeoutMs,
    ...(connection.tokenSource ? { tokenSource: connection.tokenSource } : {}),
    http: config.kubeHttp,
  });
  const { kube, invocationKube, apiFailing, guard } = guardedKube(
    watchCredentialRefusal(transport, log, metrics),
    settings,
  );
  const kubefn = createKubefn(settings, {
    kube,
    invocationKube,
    apiFailing,
    queue,
    // The work queue takes only this process's own sends: its sweep's bodies need no MAC.
    inProcessQueue: true,
    prober: createNodeProber(),
    log,
    metrics,
    ...opts.ports,
  });
  consume = kubefn.consume;
  // Each controller's reconcile series from 0, as controller-runtime starts them: a counter that
  // first appears at 1 loses that first increase to rate().
  for (const controller of kubefn.controllers) {
    for (const result of reconcileResults)
      metrics.count("controller_runtime_reconcile_total", { controller, result }, 0);
    metrics.count("controller_runtime_reconcile_errors_total", { controller }, 0);
  }
  // Replicas: one holder of the sweep Lease sweeps (and so probes) each period; see sweep-lease.ts.
  const lease = config.sweepLease
    ? createSweepLease({
        kube,
        namespace: config.sweepLease.namespace ?? connection.namespace ?? "kubefn-system",
        name: config.sweepLease.name,
        holder: `${hostname()}-${randomToken().slice(0, 8)}`,
        durationSeconds: 2 * settings.sweepPeriodSeconds,
        log,
        metrics,
      })
    : undefined;
  const sweeper = startSweeper((full) => kubefn.sweep({ full }), settings.sweepPeriodSeconds, log, lease);
  return {
    kubefn,
    queue,
    guard,
    sweep: sweeper.sweep,
    async stop() {
      await sweeper.stop();
      await queue.close();
    },
  };
}
