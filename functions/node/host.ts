import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { KubeConfig } from "@kubernetes/client-node";
import { Hono } from "hono/tiny";
import { createKube, guardedKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { readManifestDirectory } from "../../shared/kube/node-manifests.ts";
import type { Context, Log } from "../../shared/runtime/index.ts";
import { createKubefn, type Kubefn } from "../kubefn.ts";
import { createNodeProber } from "../ports/index.ts";
import { PrometheusMetrics } from "../telemetry/index.ts";
import type { NodeHostConfig } from "./config.ts";
import { type Devcluster, startDevcluster } from "./devcluster.ts";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "./install.ts";
import { WorkQueue } from "./work-queue.ts";

export type { NodeHostConfig };

export interface NodeHost {
  url: string;
  ctx: Context;
  queue: WorkQueue;
  metrics: PrometheusMetrics;
  devcluster?: Devcluster;
  /** Runs one sweep now (the timer runs it every sweep period). */
  sweep(full?: boolean): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The embedded platform: intake, reconcile and sweep in one Node process. With no kubeconfig it
 * starts the devcluster with its audit webhook pointed here, installs the CRDs and RBAC, and
 * runs as the least-privileged `kubefn-system/kubefn` ServiceAccount.
 *
 * Caveats: passes run in process with per-key single-flight, so a key never has two passes at
 * once here (serverless platforms give no such promise; the runtime does not rely on it).
 */
export async function startNodeHost(config: NodeHostConfig, log: Log): Promise<NodeHost> {
  const metrics = new PrometheusMetrics();
  const settings = { ...config.settings };
  // The embedded devcluster's audit webhook gets a token of its own.
  if (!config.kubeconfig) settings.auditToken ??= randomToken();
  let kubefn: Kubefn | undefined;
  const http = new Hono();
  http.get("/metrics", (c, next) => {
    if (!kubefn) return next();
    const s = queue.stats();
    metrics.gauge("kubefn_queue_ready", s.ready);
    metrics.gauge("kubefn_queue_running", s.running);
    metrics.gauge("kubefn_queue_delayed", s.delayed);
    const g = guard.stats();
    metrics.gauge("kubefn_api_circuit_open", g.state === "closed" ? 0 : 1);
    metrics.gauge("kubefn_api_circuit_opened", g.opened);
    metrics.gauge("kubefn_api_requests_held_back", g.heldBack);
    metrics.gauge("kubefn_api_requests_over_budget", g.overBudget);
    return c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });
  http.all("*", (c) => (kubefn ? kubefn.fetch(c.req.raw) : c.json({ error: "starting" }, 503)));
  const server = serve({ fetch: http.fetch, port: config.port, hostname: config.host });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", () => resolve());
    server.once("error", reject);
  });
  const url = `http://${config.host}:${(server.address() as AddressInfo).port}`;
  const { kc, devcluster } = await clusterFor(config, url, settings.auditToken, log);

  const queue: WorkQueue = new WorkQueue({
    concurrency: settings.passConcurrency,
    handle: async (message) => void (await kubefn?.consume(message)),
    onError: (err, message) => log.error("pass crashed", { request: message.request, error: String(err) }),
  });
  const { kube, invocationKube, guard } = guardedKube(
    createNodeTransport(kc, { timeoutMs: settings.kubeTimeoutMs }),
    settings,
  );
  kubefn = createKubefn(settings, {
    kube,
    invocationKube,
    queue,
    prober: createNodeProber(),
    log,
    metrics,
    // Read once at start, like every other setting.
    ...(config.siteManifestsDir ? { siteManifests: readManifestDirectory(config.siteManifestsDir) } : {}),
  });

  let sweeping: Promise<void> | undefined;
  const sweep = (full = false): Promise<void> => {
    if (!kubefn) return Promise.resolve();
    const running = kubefn;
    sweeping ??= running
      .sweep({ full })
      .then(() => undefined)
      .finally(() => {
        sweeping = undefined;
      });
    return sweeping;
  };
  log.info("listening", { url, intake: `${url}/v1/events`, metrics: `${url}/metrics` });
  // The first sweep (every object once) runs in the background, so the caller can install its
  // shutdown handling at once; `stop` waits for a sweep in flight.
  const sweepLogged = (full = false) =>
    void sweep(full).catch((err: unknown) => log.error("sweep failed", { error: String(err) }));
  sweepLogged(true);
  const timer = setInterval(() => sweepLogged(), settings.sweepPeriodSeconds * 1000);

  return {
    url,
    ctx: kubefn.ctx,
    queue,
    metrics,
    ...(devcluster ? { devcluster } : {}),
    sweep,
    async stop() {
      clearInterval(timer);
      await sweeping?.catch(() => undefined);
      await queue.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await devcluster?.stop();
    },
  };
}

/** The given cluster (installing CRDs and RBAC if asked), or the embedded devcluster, as kubefn's ServiceAccount. */
async function clusterFor(
  config: NodeHostConfig,
  url: string,
  auditToken: string | undefined,
  log: Log,
): Promise<{ kc: KubeConfig; devcluster?: Devcluster }> {
  if (config.kubeconfig) {
    const kc = loadKubeConfig({ file: config.kubeconfig });
    if (config.install) log.info("installed", await installCrdsAndRbac(createKube(createNodeTransport(kc))));
    return { kc };
  }
  log.info("starting the devcluster (embedded etcd, kube-apiserver, controllers, simulated node)");
  const devcluster = await startDevcluster({
    auditWebhookUrl: `${url}/v1/events`,
    auditWebhookToken: auditToken,
  });
  const { server, version, kubeconfig } = devcluster.info;
  log.info("cluster up", { server, version, kubeconfig });
  const admin = loadKubeConfig({ file: kubeconfig });
  log.info("CRDs and RBAC installed", await installCrdsAndRbac(createKube(createNodeTransport(admin))));
  const token = await serviceAccountToken(createNodeTransport(admin), "kubefn-system", "kubefn");
  log.info("reconciling as system:serviceaccount:kubefn-system:kubefn");
  return { kc: asServiceAccount(admin, token), devcluster };
}

function randomToken(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}
