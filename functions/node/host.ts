import { hostname } from "node:os";
import {
  createKubefn,
  createSweepLease,
  issuerRoutes,
  type Kubefn,
  type Log,
  messageKey,
  PrometheusMetrics,
  reconcileResults,
} from "../../shared/app/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import { guardedNodeKube } from "../../shared/kube/node.ts";
import { readManifestDirectory } from "../../shared/kube/node-manifests.ts";
import { connectCluster, randomToken } from "./cluster.ts";
import type { NodeHostConfig } from "./config.ts";
import type { Devcluster } from "./dev/index.ts";
import { type FleetCluster, startFleet } from "./fleet.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { type HostParts, hostApp, listen, metricsApp } from "./server.ts";
import { startSpanExport } from "./span-export.ts";
import { cloudEventsStateChanges } from "./state-changes.ts";
import { startSweeper } from "./sweeper.ts";
import { WorkQueue } from "./work-queue.ts";

export type { NodeHostConfig };

/** Deliveries of one message before the Node host drops it, as a queue's `max_retries` + 1. */
const MAX_DELIVERIES = 4;

export interface NodeHost {
  url: string;
  /** Where `/metrics` is served when it has a listener of its own (`KUBEFN_METRICS_PORT`). */
  metricsUrl?: string;
  queue: WorkQueue;
  metrics: PrometheusMetrics;
  devcluster?: Devcluster;
  /** The declared clusters (`KUBEFN_CLUSTERS`), by name: each one's queue and sweep. */
  clusters?: Record<string, FleetCluster>;
  /** Runs one sweep now (the timer runs it every sweep period). */
  sweep(full?: boolean): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The embedded platform: intake, reconcile and sweep in one Node process. In a Pod (no
 * kubeconfig, `KUBERNETES_SERVICE_HOST` set) it reconciles as the Pod's ServiceAccount. With
 * neither it starts the devcluster with its audit webhook pointed here, installs the CRDs and RBAC, and
 * runs as the least-privileged `kubefn-system/kubefn` ServiceAccount.
 *
 * Caveats: passes run in process with per-key single-flight, so a key never has two passes at
 * once here (serverless platforms give no such promise; the runtime does not rely on it).
 */
export async function startNodeHost(config: NodeHostConfig, log: Log): Promise<NodeHost> {
  const metrics = new PrometheusMetrics();
  const settings = { ...config.settings };
  // The embedded devcluster's audit webhook gets a token of its own.
  if (!config.kubeconfig && !config.inCluster) settings.auditToken ??= randomToken();
  let parts: HostParts | undefined;
  const issuer = settings.oidcIssuer ? issuerRoutes(settings.oidcIssuer) : undefined;
  const separateMetrics = config.metricsPort !== undefined;
  const { url, close: closeMain } = await listen(
    hostApp(metrics, () => parts, issuer, { metrics: !separateMetrics }).fetch,
    config.port,
    config.host,
    config.tls,
  );
  const metricsListener =
    config.metricsPort !== undefined
      ? await listen(metricsApp(metrics, () => parts).fetch, config.metricsPort, config.host)
      : undefined;
  const close = async () => {
    await Promise.all([closeMain(), metricsListener?.close()]);
  };
  // Read once at start, like every other setting.
  const operatorOptions = Object.fromEntries(
    config.manifestDirectories.map(({ option, dir }) => [option, readManifestDirectory(dir)]),
  );
  // Loaded only when asked for: a host without an OTLP endpoint never imports the SDK.
  const spanExport = config.exportSpans ? await startSpanExport() : undefined;
  if (spanExport) log.info("exporting spans over OTLP", {});
  if (settings.clusters) {
    const shared = {
      operatorOptions,
      ...(spanExport ? { spans: spanExport.spans } : {}),
      ...(config.stateChanges ? { stateChanges: cloudEventsStateChanges(config.stateChanges) } : {}),
    };
    const fleet = await startFleet(config, settings.clusters, metrics, log, shared).catch(
      async (err: unknown) => {
        await spanExport?.shutdown();
        await close();
        throw err;
      },
    );
    const [first] = fleet.clusters as [FleetCluster, ...FleetCluster[]];
    parts = {
      kubefn: { fetch: fleet.fetch },
      queue: first.queue,
      guard: first.guard,
      clusters: fleet.clusters,
    };
    log.info("listening", {
      url,
      intake: `${url}/v1/events`,
      clusters: settings.clusters.map((c) => c.name).join(","),
    });
    return {
      url,
      ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
      queue: first.queue,
      metrics,
      clusters: Object.fromEntries(fleet.clusters.map((c) => [c.cluster, c])),
      sweep: async (full) => {
        await Promise.all(fleet.clusters.map((c) => c.sweep(full)));
      },
      async stop() {
        await Promise.all(fleet.clusters.map((c) => c.stop()));
        await spanExport?.shutdown();
        await close();
      },
    };
  }
  const { kc, tokenSource, namespace, devcluster } = await connectCluster(
    config,
    url,
    settings.auditToken,
    log,
  );
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
    metrics,
  });
  const { kube, invocationKube, apiFailing, guard } = guardedNodeKube(
    kc,
    settings,
    tokenSource,
    config.kubeHttp,
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
    metrics: config.metricsPerObject ? metrics : withoutObjectSeries(metrics),
    ...(spanExport ? { spans: spanExport.spans } : {}),
    ...(config.stateChanges ? { stateChanges: cloudEventsStateChanges(config.stateChanges) } : {}),
    operatorOptions,
  });
  // Each controller's reconcile series from 0, as controller-runtime starts them: a counter that
  // first appears at 1 loses that first increase to rate().
  for (const controller of kubefn.controllers) {
    for (const result of reconcileResults)
      metrics.count("controller_runtime_reconcile_total", { controller, result }, 0);
    metrics.count("controller_runtime_reconcile_errors_total", { controller }, 0);
  }
  consume = kubefn.consume;
  parts = { kubefn, queue, guard };
  log.info("listening", { url, intake: `${url}/v1/events`, metrics: `${url}/metrics` });
  // Replicas: one holder of the sweep Lease sweeps (and so probes) each period; see sweep-lease.ts.
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
  return {
    url,
    ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
    queue,
    metrics,
    ...(devcluster ? { devcluster } : {}),
    sweep: sweeper.sweep,
    async stop() {
      await sweeper.stop();
      await queue.close();
      // After the last pass: its span is sent before the process exits.
      await spanExport?.shutdown();
      await close();
      await devcluster?.stop();
    },
  };
}
