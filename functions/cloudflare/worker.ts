/**
 * The Cloudflare Workers entry (wrangler.toml `main`): `fetch` is the intake, `queue` the
 * reconcile consumer, `scheduled` the cron sweep — each one call on {@link createKubefn}, built
 * from `env` once per isolate.
 *
 * A bad `env` fails loudly, naming every bad variable: `fetch` answers 500 and logs the list;
 * `queue` and `scheduled` throw it (batches are retried, then dead-lettered).
 *
 * Batches from the dead-letter queue ({@link DEAD_LETTER_QUEUE}, wrangler.toml's second consumer)
 * are recorded, not run: `kubefn.deadLetters` (a log line, a metric point, a Warning Event on
 * the object a pass names).
 *
 * Metrics go to the `KUBEFN_METRICS` Analytics Engine dataset, aggregated: each invocation writes
 * one data point per series it touched when its work is done (see {@link createAnalyticsMetrics}).
 *
 * With `KUBEFN_CLUSTERS` it builds one kubefn per declared cluster and puts `dispatchByCluster`
 * in front: each queue message runs in its own cluster's kubefn, each cron run sweeps the clusters
 * side by side, and intake knows a batch's cluster by its credential.
 *
 * Caveats: each invocation has a subrequest budget (50 on the free plan, 10,000 paid) and at most
 * 6 open connections; a sweep that lists and probes many objects spends it (the probe
 * concurrency defaults to 6).
 */

import { connect } from "cloudflare:sockets";
import type { ExecutionContext, MessageBatch, ScheduledController } from "@cloudflare/workers-types/index.ts";
import {
  type ClusterKubefn,
  clusterMember,
  createJsonLog,
  createKubefn,
  dispatchByCluster,
  expandedBody,
  type Kubefn,
  type KubefnPorts,
} from "../../shared/app/index.ts";
import { createSocketProber } from "../../shared/health/socket-prober.ts";
import { guardedKube } from "../../shared/kube/index.ts";
import { TUNNEL_PATH } from "../../shared/tunnel/index.ts";
import { parseWorkerEnv, type WorkerCluster, WorkerConfigError, type WorkerEnv } from "./config.ts";
import { workerTransport } from "./kube-transport.ts";
import { DEAD_LETTER_QUEUE, queuesPort, settle } from "./queue.ts";
import { queueStateChanges } from "./state-changes.ts";
import { type AggregatedMetrics, createAnalyticsMetrics } from "./telemetry.ts";
import { tunnelFetch, tunnelObject } from "./tunnel.ts";

export { KubeTunnel } from "./tunnel.ts";

/** What an isolate builds from `env` once: the seam, and the metrics its invocations flush. */
interface WorkerParts {
  kubefn: Kubefn;
  metrics: AggregatedMetrics;
  /** Whether the relay's tunnel carries the API requests (its opening is served then only). */
  tunnelled: boolean;
}

// A cache, not state: a fresh isolate (or env) rebuilds the same thing; metrics are flushed by
// every invocation, so nothing in it must outlive one.
const isolates = new WeakMap<WorkerEnv, WorkerParts>();

function partsFor(env: WorkerEnv): WorkerParts {
  const cached = isolates.get(env);
  if (cached) return cached;
  const config = parseWorkerEnv(env);
  if (config.kubeVia === "relay" && !env.KUBEFN_TUNNEL)
    throw new WorkerConfigError(
      'invalid Worker environment:\n  KUBE_VIA = "relay" needs the KUBEFN_TUNNEL Durable Object binding (wrangler.toml)',
    );
  const apiFetch =
    config.kubeVia === "relay" && env.KUBEFN_TUNNEL ? tunnelFetch(env.KUBEFN_TUNNEL) : undefined;
  const metrics = createAnalyticsMetrics(env.KUBEFN_METRICS);
  const log = createJsonLog(config.logLevel);
  const ports: Omit<KubefnPorts, "kube"> = {
    queue: queuesPort(env.KUBEFN_QUEUE),
    prober: createSocketProber({ connect }),
    // An invocation's 6 connections are its own; a slot shared across invocations would make one
    // wait for another's promise, which workerd cancels as hung (and the slot is lost).
    probeSlots: "invocation",
    log,
    metrics,
    ...(env.STATE_CHANGES ? { stateChanges: queueStateChanges(env.STATE_CHANGES) } : {}),
  };
  const kubefn = config.fleet
    ? dispatchByCluster(
        config.fleet.map((c) => clusterKubefn(c, config, ports)),
        { log, metrics, maxBodyBytes: config.maxBodyBytes },
      )
    : createKubefn(config, {
        ...guardedKube(workerTransport(config, undefined, apiFetch), config),
        ...ports,
      });
  const parts = { kubefn, metrics, tunnelled: apiFetch !== undefined };
  isolates.set(env, parts);
  return parts;
}

/**
 * One declared cluster's kubefn (`KUBEFN_CLUSTERS`): its own transport, circuit, request budget
 * and admission gate, its intake credentials, `cluster` on its log lines and series; the queue,
 * prober and metrics dataset are the Worker's.
 */
function clusterKubefn(
  c: WorkerCluster,
  config: ReturnType<typeof parseWorkerEnv>,
  ports: Omit<KubefnPorts, "kube">,
): ClusterKubefn {
  return clusterMember(c.declared, config, ports, (settings) =>
    guardedKube(workerTransport({ ...c, kubeTimeoutMs: config.kubeTimeoutMs }), settings),
  );
}

/** `work`; once it settles, the invocation writes what it recorded (one flush, off its answer). */
function flushedAfter<T>(
  exec: ExecutionContext,
  metrics: AggregatedMetrics,
  work: T | Promise<T>,
): Promise<T> {
  const done = Promise.resolve(work);
  const flush = () => {
    metrics.flush();
  };
  exec.waitUntil(done.then(flush, flush));
  return done;
}

export default {
  async fetch(request: Request, env: WorkerEnv, exec: ExecutionContext): Promise<Response> {
    let parts: WorkerParts;
    try {
      parts = partsFor(env);
    } catch (err) {
      if (!(err instanceof WorkerConfigError)) throw err;
      console.error(err.message);
      return Response.json({ error: "the Worker is misconfigured; see its logs" }, { status: 500 });
    }
    // The relay's tunnel (KUBE_VIA = "relay"): its opening is checked by the object that holds it.
    if (parts.tunnelled && env.KUBEFN_TUNNEL && new URL(request.url).pathname === TUNNEL_PATH)
      return tunnelObject(env.KUBEFN_TUNNEL).fetch(request);
    return flushedAfter(exec, parts.metrics, parts.kubefn.fetch(request));
  },

  async queue(batch: MessageBatch<unknown>, env: WorkerEnv, exec: ExecutionContext): Promise<void> {
    const { kubefn, metrics } = partsFor(env);
    // A body the queue port gzipped (a probe shard) is expanded before the core opens it.
    const deliveries = await Promise.all(
      batch.messages.map(async (m) => ({ body: await expandedBody(m.body), attempts: m.attempts })),
    );
    const work =
      batch.queue === DEAD_LETTER_QUEUE ? kubefn.deadLetters(deliveries) : kubefn.consume(deliveries);
    settle(batch.messages, await flushedAfter(exec, metrics, work));
  },

  scheduled(controller: ScheduledController, env: WorkerEnv, exec: ExecutionContext): void {
    const { kubefn, metrics } = partsFor(env);
    // Planned from the schedule's minute, not from when this invocation started.
    const sweep = kubefn.sweep({ scheduledTime: new Date(controller.scheduledTime) });
    exec.waitUntil(flushedAfter(exec, metrics, sweep));
  },
};
