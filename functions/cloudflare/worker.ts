/**
 * The Cloudflare Workers entry (wrangler.toml `main`): `fetch` is the intake, `queue` the
 * reconcile consumer, `scheduled` the cron sweep. Everything is wired from `env` once per isolate.
 *
 * A bad `env` fails loudly, naming every bad variable: `fetch` answers 500 and logs the list;
 * `queue` and `scheduled` throw it (batches are retried, then dead-lettered).
 *
 * Caveats: each invocation has a subrequest budget (50 on the free plan, 1000 paid) and at most
 * 6 open connections; a sweep that lists and probes many Proxies spends it (the probe
 * concurrency defaults to 6).
 */

import { connect } from "cloudflare:sockets";
import type { ExecutionContext, MessageBatch, ScheduledController } from "@cloudflare/workers-types/index.ts";
import type { Hono } from "hono";
import { createSocketProber } from "../../shared/health/socket-prober.ts";
import { createFetchTransport, createKube } from "../../shared/kube/index.ts";
import { runPass } from "../../shared/runtime/index.ts";
import type { Context } from "../../shared/runtime/types.ts";
import { createFunctionsApp } from "../http.ts";
import { createOperators, type Operators } from "../operators.ts";
import { runSweep } from "../sweep.ts";
import { parseWorkerEnv, type WorkerConfig, WorkerConfigError, type WorkerEnv } from "./config.ts";
import { consumeBatch, queuesPort } from "./queue.ts";
import { createConsoleLog, createMetrics } from "./telemetry.ts";

interface Isolate {
  ctx: Context;
  config: WorkerConfig;
  operators: Operators;
  app: Hono;
}

// A cache, not state: a fresh isolate (or env) rebuilds the same thing.
const isolates = new WeakMap<WorkerEnv, Isolate>();

function isolateFor(env: WorkerEnv): Isolate {
  const cached = isolates.get(env);
  if (cached) return cached;
  const config = parseWorkerEnv(env);
  const ctx: Context = {
    kube: createKube(createFetchTransport({ server: config.kubeServer, token: config.kubeToken }), {
      fieldManager: "kubefn",
    }),
    queue: queuesPort(env.KUBEFN_QUEUE),
    clock: { now: () => new Date() },
    log: createConsoleLog(),
    metrics: createMetrics(env.KUBEFN_METRICS),
    random: Math.random,
  };
  const operators = createOperators({
    prober: createSocketProber({ connect }),
    sweepPeriodSeconds: config.sweepPeriodSeconds,
    probeConcurrency: config.probeConcurrency,
    ...(config.proxyResyncSeconds ? { proxyResyncSeconds: config.proxyResyncSeconds } : {}),
    ...(config.apiToken ? { apiToken: config.apiToken } : {}),
    settings: config.operators,
  });
  const app = createFunctionsApp(ctx, operators, config);
  const isolate = { ctx, config, operators, app };
  isolates.set(env, isolate);
  return isolate;
}

export default {
  async fetch(request: Request, env: WorkerEnv): Promise<Response> {
    let isolate: Isolate;
    try {
      isolate = isolateFor(env);
    } catch (err) {
      if (!(err instanceof WorkerConfigError)) throw err;
      console.error(err.message);
      return Response.json({ error: "the Worker is misconfigured; see its logs" }, { status: 500 });
    }
    return isolate.app.fetch(request);
  },

  async queue(batch: MessageBatch<unknown>, env: WorkerEnv): Promise<void> {
    const { ctx, operators } = isolateFor(env);
    await consumeBatch(
      batch,
      async (message) => {
        const r = await runPass(ctx, operators.registry, message);
        (r.result === "error" ? ctx.log.error : ctx.log.info)("pass", { ...r });
      },
      ctx.log,
      ctx.random,
    );
  },

  scheduled(controller: ScheduledController, env: WorkerEnv, exec: ExecutionContext): void {
    const { ctx, config, operators } = isolateFor(env);
    exec.waitUntil(
      runSweep(ctx, operators.registry, operators.sweepTasks, {
        shardSize: 100,
        snapshots: true,
        periodSeconds: config.sweepPeriodSeconds,
      }).then((summary) => ctx.log.info("sweep", { cron: controller.cron, ...summary })),
    );
  },
};
