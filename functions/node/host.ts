import { issuerRoutes, type Log, PrometheusMetrics } from "../../shared/app/index.ts";
import { readManifestDirectory } from "../../shared/kube/node-manifests.ts";
import { connectCluster, randomToken } from "./cluster.ts";
import { startClusterApiDiscovery } from "./cluster-api.ts";
import type { NodeHostConfig } from "./config.ts";
import type { Devcluster } from "./dev/index.ts";
import { type FleetCluster, startFleet } from "./fleet.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { startReconciler } from "./reconciler.ts";
import { type HostParts, hostApp, listen, metricsApp } from "./server.ts";
import { startSpanExport } from "./span-export.ts";
import { cloudEventsStateChanges } from "./state-changes.ts";
import { WorkQueue } from "./work-queue.ts";

export type { NodeHostConfig };

export interface NodeHost {
  url: string;
  /** Where `/metrics` is served when it has a listener of its own (`KUBEFN_METRICS_PORT`). */
  metricsUrl?: string;
  queue: WorkQueue;
  metrics: PrometheusMetrics;
  devcluster?: Devcluster;
  /** The fleet's clusters (declared and discovered), by name, as they are now: each one's queue and sweep. */
  clusters?: Record<string, FleetCluster>;
  /** Cluster API discovery: reads every `Cluster` now and acts on it (its watch and timer do too). */
  discover?: () => Promise<void>;
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
  if (settings.clusters || config.clusterApi) {
    const shared = {
      operatorOptions,
      ...(spanExport ? { spans: spanExport.spans } : {}),
      ...(config.stateChanges ? { stateChanges: cloudEventsStateChanges(config.stateChanges) } : {}),
    };
    const declared = settings.clusters ?? [];
    const failed = async (err: unknown) => {
      await spanExport?.shutdown();
      await close();
      throw err;
    };
    const fleet = await startFleet(config, declared, metrics, log, shared).catch(failed);
    const discovery = config.clusterApi
      ? await startClusterApiDiscovery({
          config,
          settings: config.clusterApi,
          fleet,
          declared,
          log,
          metrics,
        }).catch(async (err: unknown) => {
          await fleet.stop();
          return failed(err);
        })
      : undefined;
    // With no cluster declared, the host's own queue is an idle one of its own: each discovered
    // cluster has its queue in `clusters`.
    const queue =
      fleet.clusters[0]?.queue ?? new WorkQueue({ concurrency: 1, handle: async () => undefined });
    parts = {
      kubefn: { fetch: fleet.fetch },
      get clusters() {
        return fleet.clusters;
      },
    };
    log.info("listening", {
      url,
      intake: `${url}/v1/events`,
      clusters: declared.map((c) => c.name).join(","),
      ...(config.clusterApi ? { clusterApiNamespaces: config.clusterApi.namespaces.join(",") } : {}),
    });
    return {
      url,
      ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
      queue,
      metrics,
      get clusters() {
        return Object.fromEntries(fleet.clusters.map((c) => [c.cluster, c]));
      },
      ...(discovery ? { discover: discovery.sync } : {}),
      sweep: async (full) => {
        await Promise.all(fleet.clusters.map((c) => c.sweep(full)));
      },
      async stop() {
        await discovery?.stop();
        await fleet.stop();
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
  const {
    kubefn,
    queue,
    guard,
    sweep,
    stop: stopReconciler,
  } = startReconciler({
    config,
    settings,
    connection: { kc, ...(tokenSource ? { tokenSource } : {}), ...(namespace ? { namespace } : {}) },
    log,
    metrics: config.metricsPerObject ? metrics : withoutObjectSeries(metrics),
    queueMetrics: metrics,
    ports: {
      ...(spanExport ? { spans: spanExport.spans } : {}),
      ...(config.stateChanges ? { stateChanges: cloudEventsStateChanges(config.stateChanges) } : {}),
      operatorOptions,
    },
  });
  parts = { kubefn, queue, guard };
  log.info("listening", { url, intake: `${url}/v1/events`, metrics: `${url}/metrics` });
  return {
    url,
    ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
    queue,
    metrics,
    ...(devcluster ? { devcluster } : {}),
    sweep,
    async stop() {
      await stopReconciler();
      // After the last pass: its span is sent before the process exits.
      await spanExport?.shutdown();
      await close();
      await devcluster?.stop();
    },
  };
}
