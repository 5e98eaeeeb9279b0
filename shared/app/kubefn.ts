import type { ProvidersByName } from "../controllers/proxy/providers/index.ts";
import { describeShape } from "../guards/index.ts";
import type { Prober } from "../health/index.ts";
import type { KubeObject } from "../kube/index.ts";
import type { Clock, Context, Kube, Log, Metrics, Queue } from "../runtime/index.ts";
import {
  createSweepMemo,
  INVOCATION_READ_MAX_AGE_SECONDS,
  isMessage,
  type PassResult,
  runPass,
  type SweepMemo,
} from "../runtime/index.ts";
import { fleetPage, PassHistory } from "./fleet/index.ts";
import { createFunctionsApp } from "./http.ts";
import { createOperators, type Operators } from "./operators.ts";
import type { KubefnSettings } from "./settings.ts";
import { runSweep, type SweepSummary } from "./sweep.ts";

/** What a platform binds: the outside world, as the core's ports. */
export interface KubefnPorts {
  kube: Kube;
  /**
   * A Kube for one platform invocation ({@link Kubefn.invocation}: a queue batch, a Lambda event,
   * a sweep, a Node host pass), e.g. with its own request budget (`guardedKube` in shared/kube);
   * `kube` serves the invocations too when unset.
   */
  invocationKube?: () => Kube;
  /**
   * True while the API server is failing (the instance's circuit is open): a sweep then fans
   * nothing out — every pass it sent would only run into the circuit. Never true when unset.
   */
  apiFailing?: () => boolean;
  /** Enqueue now or after a delay: Queues, EventBridge (+ Scheduler), or the Node host's work queue. */
  queue: Queue;
  prober: Prober;
  log: Log;
  metrics: Metrics;
  /** Wall clock; `new Date()` when unset. */
  clock?: Clock;
  /** Jitter source; `Math.random` when unset. */
  random?: () => number;
  /** Instance providers beyond the built-in Kubernetes pod provider and the settings' gce. */
  providers?: (kube: Kube) => ProvidersByName;
  /**
   * Site component manifests from the platform's filesystem (the Node host's
   * `SITE_MANIFESTS_DIR`); the embedded bundle when unset — a Worker has no filesystem.
   */
  siteManifests?: readonly KubeObject[];
}

/** The work of one platform invocation, sharing one request budget across its passes. */
export interface Invocation {
  /** One reconcile pass for one queue message body; see {@link Kubefn.consume}. */
  consume(body: unknown): Promise<PassResult | undefined>;
  /** One sweep; see {@link Kubefn.sweep}. */
  sweep(options?: { full?: boolean }): Promise<SweepSummary>;
}

/** The three calls every platform maps its events onto. */
export interface Kubefn {
  /**
   * The HTTP surface: intake (`POST /v1/events`, `GET /healthz`), the crawler API, and the fleet
   * page (`GET /`, behind the API token when one is set).
   */
  fetch(request: Request): Response | Promise<Response>;
  /**
   * One reconcile pass for one queue message body, logged as one `pass` line. A body that is
   * not a reconcile message is logged and dropped (`undefined`).
   *
   * Caveats: a pass reports its failures as follow-ups; a throw here is a crash (or a log sink
   * that threw), which the platform should redeliver.
   */
  consume(body: unknown): Promise<PassResult | undefined>;
  /**
   * One sweep, logged as one `sweep` line. `full` sends every object (a host's first sweep).
   *
   * Caveats: a sweep is one invocation: its lists and tasks share `REQUEST_BUDGET`. Where probes
   * run in the sweep (`PROBE_SHARD_SIZE=0`), a fleet whose health changes all at once spends it on
   * probe writes, and the rest are written at the next sweep. While the circuit is open it does nothing
   * (`heldBack`).
   */
  sweep(options?: { full?: boolean }): Promise<SweepSummary>;
  /**
   * One platform invocation (a Workers queue batch, a Lambda event, a cron run): its passes and
   * sweep share one Kube from `invocationKube`, so `REQUEST_BUDGET` bounds the invocation, not
   * each pass, and one `ctx.memo`, so a read of shared state (the proxy gateway's EndpointSlices)
   * serves every pass of the batch for up to 30 s. `consume` and `sweep` above are each an
   * invocation of their own. `memo` shares those reads with other invocations of one batch
   * instead (the Node host's passes each have their own budget, but one queue send's share reads).
   *
   * @example
   * const invocation = kubefn.invocation();
   * for (const message of batch.messages) await invocation.consume(message.body);
   */
  invocation(memo?: SweepMemo): Invocation;
  /** The context passes run with (for the Node host's metrics page and for tests). */
  readonly ctx: Context;
  readonly operators: Operators;
  /** The last passes this instance ran, as the fleet page lists them. */
  readonly passes: PassHistory;
}

/**
 * The one seam between kubefn and a platform, as Hono's `app.fetch` is: settings and ports in,
 * `{ fetch, consume, sweep }` out. An adapter parses its environment into {@link KubefnSettings},
 * binds its ports, and maps its event shapes onto the three calls.
 *
 * @example
 * const kubefn = createKubefn(settings, { kube, queue, prober, log, metrics });
 * export default { fetch: (req) => kubefn.fetch(req) };
 *
 * `operators` replaces the operators built from the settings (tests run a registry of their own).
 */
export function createKubefn(settings: KubefnSettings, ports: KubefnPorts, operators?: Operators): Kubefn {
  const ctx: Context = {
    kube: ports.kube,
    queue: ports.queue,
    clock: ports.clock ?? { now: () => new Date() },
    log: ports.log,
    metrics: ports.metrics,
    random: ports.random ?? Math.random,
  };
  const ops =
    operators ??
    createOperators({
      prober: ports.prober,
      sweepPeriodSeconds: settings.sweepPeriodSeconds,
      probeConcurrency: settings.probeConcurrency,
      ...(settings.probeShardSize ? { probeShardSize: settings.probeShardSize } : {}),
      ...(ports.providers ? { providers: ports.providers } : {}),
      ...(settings.proxyResyncSeconds ? { proxyResyncSeconds: settings.proxyResyncSeconds } : {}),
      ...(settings.minReportIntervalSeconds
        ? { minReportIntervalSeconds: settings.minReportIntervalSeconds }
        : {}),
      ...(settings.orphanGraceSeconds === undefined
        ? {}
        : { orphanGraceSeconds: settings.orphanGraceSeconds }),
      ...(settings.apiToken ? { apiToken: settings.apiToken } : {}),
      settings: settings.operators,
      ...(ports.siteManifests ? { siteManifests: ports.siteManifests } : {}),
    });
  const passes = new PassHistory();
  const app = createFunctionsApp(ctx, ops, settings);
  const primaries = ops.registry.controllers.map((c) => ({ controller: c.name, resource: c.for }));
  app.route("/", fleetPage(ctx, primaries, passes, settings.apiToken ? { apiToken: settings.apiToken } : {}));
  const invocation = (memo?: SweepMemo): Invocation => {
    const invocationCtx: Context = {
      ...ctx,
      ...(ports.invocationKube ? { kube: ports.invocationKube() } : {}),
      memo: memo ?? createSweepMemo(INVOCATION_READ_MAX_AGE_SECONDS * 1000),
    };
    return {
      async consume(body) {
        if (!isMessage(body)) {
          ctx.log.error("queue message is not a reconcile request; dropped", { body: describeShape(body) });
          return undefined;
        }
        const result = await runPass(invocationCtx, ops.registry, body);
        passes.record(result, ctx.clock.now());
        (result.result === "error" ? ctx.log.error : ctx.log.info)("pass", passLine(result));
        return result;
      },
      async sweep(options = {}) {
        if (ports.apiFailing?.()) {
          // Each message would only run into the open circuit; the next sweep sends what is due.
          ctx.log.warn("sweep held back: the API server is failing", {});
          ctx.metrics.count("kubefn_sweep_held_back_total", {});
          return { controllers: {}, tasks: {}, durationMs: 0, heldBack: true };
        }
        const summary = await runSweep(invocationCtx, ops.registry, ops.sweepTasks, {
          shardSize: 100,
          snapshots: true,
          periodSeconds: settings.sweepPeriodSeconds,
          ...(options.full ? { full: true } : {}),
        });
        ctx.log.info("sweep", sweepLine(summary));
        return summary;
      },
    };
  };
  return {
    ctx,
    operators: ops,
    passes,
    fetch: (request) => app.fetch(request),
    consume: (body) => invocation().consume(body),
    sweep: (options) => invocation().sweep(options),
    invocation,
  };
}

/** The fields of a `pass` log line: the result without what is empty, `ms` rounded. */
export function passLine(r: PassResult): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    key: r.key,
    trigger: r.trigger,
    result: r.result,
    ms: Math.round(r.durationMs),
  };
  if (r.wroteStatus) fields.wroteStatus = true;
  if (r.followUpSeconds !== undefined) fields.followUpSeconds = r.followUpSeconds;
  if (r.errorClass) fields.errorClass = r.errorClass;
  if (r.errorReason) fields.errorReason = r.errorReason;
  if (r.absent) fields.absent = true;
  if (r.shard) fields.shard = r.shard;
  return fields;
}

/** One short line per sweep: objects listed and due per controller, and the tasks' non-zero counts. */
export function sweepLine(summary: SweepSummary): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [name, c] of Object.entries(summary.controllers)) {
    const why = Object.entries(c.reasons).map(([reason, n]) => `${reason}=${n}`);
    fields[name] = `${c.listed} listed, ${c.due} due${why.length > 0 ? ` (${why.join(" ")})` : ""}`;
  }
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
