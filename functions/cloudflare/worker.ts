/**
 * The Cloudflare Workers entry (wrangler.toml `main`): `fetch` is the intake, `queue` the
 * reconcile consumer, `scheduled` the cron sweep — each one call on {@link createKubefn}, built
 * from `env` once per isolate.
 *
 * A bad `env` fails loudly, naming every bad variable: `fetch` answers 500 and logs the list;
 * `queue` and `scheduled` throw it (batches are retried, then dead-lettered).
 *
 * Caveats: each invocation has a subrequest budget (50 on the free plan, 10,000 paid) and at most
 * 6 open connections; a sweep that lists and probes many Proxies spends it (the probe
 * concurrency defaults to 6).
 */

import { connect } from "cloudflare:sockets";
import type { ExecutionContext, MessageBatch, ScheduledController } from "@cloudflare/workers-types/index.ts";
import { createJsonLog, createKubefn, type Kubefn } from "../../shared/app/index.ts";
import { createSocketProber } from "../../shared/health/socket-prober.ts";
import { createFetchTransport, guardedKube } from "../../shared/kube/index.ts";
import { parseWorkerEnv, WorkerConfigError, type WorkerEnv } from "./config.ts";
import { queuesPort, settle } from "./queue.ts";
import { createMetrics } from "./telemetry.ts";

// A cache, not state: a fresh isolate (or env) rebuilds the same thing.
const isolates = new WeakMap<WorkerEnv, Kubefn>();

function kubefnFor(env: WorkerEnv): Kubefn {
  const cached = isolates.get(env);
  if (cached) return cached;
  const config = parseWorkerEnv(env);
  const { kube, invocationKube, apiFailing } = guardedKube(
    createFetchTransport({
      server: config.kubeServer,
      token: config.kubeToken,
      timeoutMs: config.kubeTimeoutMs,
    }),
    config,
  );
  const kubefn = createKubefn(config, {
    kube,
    invocationKube,
    apiFailing,
    queue: queuesPort(env.KUBEFN_QUEUE),
    prober: createSocketProber({ connect }),
    log: createJsonLog(config.logLevel),
    metrics: createMetrics(env.KUBEFN_METRICS),
  });
  isolates.set(env, kubefn);
  return kubefn;
}

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    let kubefn: Kubefn;
    try {
      kubefn = kubefnFor(env);
    } catch (err) {
      if (!(err instanceof WorkerConfigError)) throw err;
      console.error(err.message);
      return Response.json({ error: "the Worker is misconfigured; see its logs" }, { status: 500 });
    }
    return kubefn.fetch(request);
  },

  async queue(batch: MessageBatch<unknown>, env: WorkerEnv): Promise<void> {
    const deliveries = batch.messages.map((m) => ({ body: m.body, attempts: m.attempts }));
    settle(batch.messages, await kubefnFor(env).consume(deliveries));
  },

  scheduled(_controller: ScheduledController, env: WorkerEnv, exec: ExecutionContext): void {
    exec.waitUntil(kubefnFor(env).sweep());
  },
};
