import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { KubeConfig } from "@kubernetes/client-node";
import { Hono } from "hono";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Kube } from "../../shared/kube/port.ts";
import { type PassResult, runPass } from "../../shared/runtime/index.ts";
import type { Context, Log } from "../../shared/runtime/types.ts";
import { createFunctionsApp, type HttpSettings } from "../http.ts";
import type { Operators } from "../operators.ts";
import { runSweep, type SweepSummary } from "../sweep.ts";
import { type Devcluster, startDevcluster } from "./devcluster.ts";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "./install.ts";
import { PrometheusMetrics } from "./prometheus.ts";
import { WorkQueue } from "./work-queue.ts";

/** The Node host's settings, parsed once from the environment by `config.ts`. */
export interface NodeHostConfig {
  /** Use this cluster; when unset, start the embedded devcluster. */
  kubeconfig?: string;
  host: string;
  port: number;
  auditToken?: string;
  relaySecret?: string;
  /** Pub/Sub push intake of GKE audit logs (see functions/http.ts). */
  pubsub?: HttpSettings["pubsub"];
  concurrency: number;
  sweepSeconds: number;
  selfUsernames: string[];
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Apply infra/crds and infra/rbac at start (always with the embedded devcluster). */
  install: boolean;
}

export interface NodeHost {
  url: string;
  ctx: Context;
  queue: WorkQueue;
  metrics: PrometheusMetrics;
  devcluster?: Devcluster;
  /** Runs one sweep now (the timer runs it every `sweepSeconds`). */
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
export async function startNodeHost(
  config: NodeHostConfig,
  makeOperators: (kube: Kube) => Operators,
  log: Log,
): Promise<NodeHost> {
  const metrics = new PrometheusMetrics();
  const auditToken = config.auditToken ?? (config.kubeconfig ? undefined : randomToken());
  const http = new Hono();
  let handler: Hono | undefined;
  http.all("*", (c) => (handler ? handler.fetch(c.req.raw) : c.json({ error: "starting" }, 503)));
  const server = serve({ fetch: http.fetch, port: config.port, hostname: config.host });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", () => resolve());
    server.once("error", reject);
  });
  const url = `http://${config.host}:${(server.address() as AddressInfo).port}`;

  let devcluster: Devcluster | undefined;
  let kc: KubeConfig;
  if (config.kubeconfig) {
    kc = loadKubeConfig({ file: config.kubeconfig });
    if (config.install) {
      const installed = await installCrdsAndRbac(createKube(createNodeTransport(kc)));
      log.info("installed", installed);
    }
  } else {
    log.info("starting the devcluster (embedded etcd, kube-apiserver, controllers, simulated node)");
    devcluster = await startDevcluster({
      auditWebhookUrl: `${url}/v1/events`,
      auditWebhookToken: auditToken,
    });
    log.info("cluster up", {
      server: devcluster.info.server,
      version: devcluster.info.version,
      kubeconfig: devcluster.info.kubeconfig,
    });
    const admin = loadKubeConfig({ file: devcluster.info.kubeconfig });
    const installed = await installCrdsAndRbac(createKube(createNodeTransport(admin)));
    log.info("CRDs and RBAC installed", installed);
    const token = await serviceAccountToken(createNodeTransport(admin), "kubefn-system", "kubefn");
    kc = asServiceAccount(admin, token);
    log.info("reconciling as system:serviceaccount:kubefn-system:kubefn");
  }

  const kube = createKube(createNodeTransport(kc), { fieldManager: "kubefn" });
  const operators = makeOperators(kube);
  const queue: WorkQueue = new WorkQueue({
    concurrency: config.concurrency,
    handle: async (message) => summarise(log, await runPass(ctx, operators.registry, message)),
    onError: (err, message) => log.error("pass crashed", { request: message.request, error: String(err) }),
  });
  const ctx: Context = {
    kube,
    queue,
    clock: { now: () => new Date() },
    log,
    metrics,
    random: Math.random,
  };

  const app = createFunctionsApp(ctx, operators, {
    ...(auditToken ? { auditToken } : {}),
    ...(config.relaySecret ? { relaySecret: config.relaySecret } : {}),
    ...(config.pubsub ? { pubsub: config.pubsub } : {}),
    maxBodyBytes: config.maxBodyBytes,
    replayWindowSeconds: config.replayWindowSeconds,
    selfUsernames: config.selfUsernames,
  });
  app.get("/metrics", (c) => {
    const s = queue.stats();
    metrics.gauge("kubefn_queue_ready", s.ready);
    metrics.gauge("kubefn_queue_running", s.running);
    metrics.gauge("kubefn_queue_delayed", s.delayed);
    return c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });
  handler = app;

  let sweeping = false;
  const sweep = async (full = false) => {
    if (sweeping) return;
    sweeping = true;
    try {
      const summary = await runSweep(ctx, operators.registry, operators.sweepTasks, {
        shardSize: 100,
        snapshots: true,
        full,
        periodSeconds: config.sweepSeconds,
      });
      log.info("sweep", sweepLine(summary));
    } finally {
      sweeping = false;
    }
  };
  log.info("listening", { url, intake: `${url}/v1/events`, metrics: `${url}/metrics` });
  await sweep(true);
  const timer = setInterval(() => void sweep(), config.sweepSeconds * 1000);

  return {
    url,
    ctx,
    queue,
    metrics,
    ...(devcluster ? { devcluster } : {}),
    sweep,
    async stop() {
      clearInterval(timer);
      await queue.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await devcluster?.stop();
    },
  };
}

function summarise(log: Log, r: PassResult): void {
  const fields: Record<string, unknown> = { key: r.key, result: r.result, ms: Math.round(r.durationMs) };
  if (r.wroteStatus) fields.status = "written";
  if (r.followUpSeconds !== undefined) fields.next = `${r.followUpSeconds}s`;
  if (r.errorClass) fields.error = `${r.errorClass}/${r.errorReason}`;
  if (r.absent) fields.absent = true;
  (r.result === "error" ? log.error : log.info)("pass", fields);
}

/** One short line per sweep: objects listed and due per controller, and the tasks' non-zero counts. */
function sweepLine(summary: SweepSummary): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [name, c] of Object.entries(summary.controllers))
    fields[name] = `${c.listed} listed, ${c.due} due`;
  for (const [task, counts] of Object.entries(summary.tasks)) {
    if ("error" in counts) {
      fields[task] = `error: ${counts.error}`;
      continue;
    }
    const nonZero = Object.entries(counts).filter(([k, v]) => v !== 0 && k !== "ms");
    if (nonZero.length > 0 && task !== "proxy-phase-gauge") fields[task] = Object.fromEntries(nonZero);
  }
  fields.ms = summary.durationMs;
  return fields;
}

function randomToken(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => b.toString(16).padStart(2, "0")).join(
    "",
  );
}
