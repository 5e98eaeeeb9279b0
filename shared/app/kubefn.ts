import { mapWithConcurrency } from "../concurrency/index.ts";
import type { ProvidersByName } from "../controllers/proxy/providers/index.ts";
import { assertNever, describeShape } from "../guards/index.ts";
import type { Prober } from "../health/index.ts";
import type { KubeObject } from "../kube/index.ts";
import type {
  Clock,
  Context,
  HopEnd,
  HopKind,
  Kube,
  Log,
  Metrics,
  Queue,
  Spans,
  StateChangeSink,
} from "../runtime/index.ts";
import {
  authenticBodies,
  backoffSeconds,
  createSweepMemo,
  derivedSealKeySource,
  ENVELOPE_VERSION,
  fitToQueue,
  hasBodies,
  INVOCATION_READ_MAX_AGE_SECONDS,
  type JobResult,
  type Message,
  messageAuthenticatorFrom,
  openEnvelope,
  type PassResult,
  runJob,
  runPass,
  type SweepMemo,
  sealed,
  statusSealFrom,
  traceFrom,
  withoutBodies,
} from "../runtime/index.ts";
import { admissionProblems, createAdmissionGate } from "./admission/index.ts";
import { fleetPage, PassHistory } from "./fleet/index.ts";
import { createFunctionsApp } from "./http.ts";
import {
  type CloudWatchLogsResult,
  type IntakeBatch,
  type IntakeCredentials,
  intakeCloudWatchLogs,
  mapWithRegistry,
} from "./intake/index.ts";
import { stoppedBySettings } from "./operator-settings.ts";
import { createOperators, type Operators } from "./operators.ts";
import type { KubefnSettings } from "./settings.ts";
import { admissionGateClosed, invocationStateChanges } from "./state-changes.ts";
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
  /** Enqueue now or after a delay: Workers Queues, SQS (Lambda), or the Node host's work queue. */
  queue: Queue;
  /**
   * True when `queue` hands its messages to this process's own `consume` and nothing else can
   * put one there (the Node host's work queue): bodies then travel without a MAC and are not
   * checked. Unset: the queue is a platform's, and every body on it needs kubefn's MAC
   * (runtime/message-mac.ts).
   */
  inProcessQueue?: boolean;
  prober: Prober;
  log: Log;
  metrics: Metrics;
  /**
   * Where each hop's span goes (the Node host's OTLP exporter, when one is configured), with the
   * trace and span ids its log lines carry. Traces live in the log lines only when unset.
   */
  spans?: Spans;
  /**
   * Whose the probe slots are (`PROBE_CONCURRENCY`, `PROBE_NAMESPACE_CONCURRENCY`): the instance's
   * when unset; `"invocation"` where a request must never wait for another's (workerd: a probe
   * shard waiting for another invocation's slot is cancelled as hung, and the slot is lost).
   */
  probeSlots?: "instance" | "invocation";
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
  /**
   * The intake's credentials, read per request: a platform that re-reads rotated secrets binds
   * it (Lambda, from Secrets Manager); the settings' `auditToken` and `relaySecret` when unset.
   */
  intakeCredentials?: () => IntakeCredentials;
  /**
   * Where state changes users route go (shared/runtime/state-changes.ts): an EventBridge bus
   * (Lambda), a bound Queue (Workers), a CloudEvents sink (Node host). None are published when unset.
   */
  stateChanges?: StateChangeSink;
}

/** One item of a platform's delivery: a queue body and how often the queue has delivered it. */
export interface Delivery {
  body: unknown;
  /** 1 on the first delivery; the backoff of a retry grows with it. 1 when unset. */
  attempts?: number;
}

/**
 * What the platform does with a delivered item: remove it from the queue, or deliver it again
 * after `retryAfterSeconds` (then the dead-letter queue, where the platform has one).
 */
export type Verdict =
  | { ack: true; pass?: PassResult; dropped?: true }
  | { ack: false; retryAfterSeconds: number };

/** Audit records a platform receives by other means than HTTP (a CloudWatch Logs subscription). */
export type Ingest = { source: "cloudwatch-logs"; data: string };

/** The four calls every platform maps its events onto. */
export interface Kubefn {
  /**
   * The HTTP surface: intake (`POST /v1/events`, `GET /healthz`), the crawler API, and the fleet
   * page (`GET /`, behind the API token when one is set).
   */
  fetch(request: Request): Response | Promise<Response>;
  /**
   * One platform delivery (a Workers queue batch, a Lambda SQS batch, one of the Node
   * host's queue sends): each item is a pass or a job, run `PASS_CONCURRENCY` at a time; they
   * share one request budget (`REQUEST_BUDGET`) and, for up to 30 s, reads of shared state (the
   * proxy gateway's EndpointSlices). `reads` shares those reads with other deliveries instead.
   * Returns one verdict per item, in order. Each pass is logged as one `pass` line, each job as
   * one `job` line, with the trace id of the chain it belongs to.
   *
   * Caveats: a pass reports its failures as follow-ups, so nearly every item is acked. An item is
   * retried when its pass crashed (a bug, or a log sink that threw) or when it was written by a
   * newer release (its envelope version is higher than this release reads); one that is not a
   * kubefn message is logged and acked.
   *
   * @example
   * const verdicts = await kubefn.consume(batch.messages.map((m) => ({ body: m.body, attempts: m.attempts })));
   * verdicts.forEach((v, i) => (v.ack ? batch.messages[i].ack() : batch.messages[i].retry({ delaySeconds: v.retryAfterSeconds })));
   */
  consume(deliveries: readonly Delivery[], options?: { reads?: SweepMemo }): Promise<Verdict[]>;
  /**
   * One sweep, logged as one `sweep` line. `full` sends every object (a host's first sweep).
   * `scheduledTime` is when the platform's schedule meant it to run (Workers
   * `controller.scheduledTime`, the Scheduled Event's `time`): the sweep plans its period, and
   * counts its probe shards' delays, from it, so a cron that fires late neither doubles nor skips a
   * probe at the minute's seam.
   *
   * Caveats: a sweep is one invocation: its lists and tasks share `REQUEST_BUDGET`. Where probes
   * run in the sweep (`PROBE_SHARD_SIZE=0`), a fleet whose health changes all at once spends it on
   * probe writes, and the rest are written at the next sweep. While the circuit is open it does nothing
   * (`heldBack`).
   */
  sweep(options?: { full?: boolean; scheduledTime?: Date }): Promise<SweepSummary>;
  /**
   * Audit records delivered by other means than HTTP: a CloudWatch Logs subscription's
   * `awslogs.data` (EKS audit logs), mapped exactly as an audit webhook `EventList` and enqueued;
   * logged as one `audit log delivery` line.
   *
   * Caveats: only a failed enqueue throws (the platform should redeliver); an undecodable delivery
   * is counted and answered without work.
   */
  ingest(delivery: Ingest): Promise<CloudWatchLogsResult>;
  /** The registered controllers' names, e.g. to start their metric series (the Node host). */
  readonly controllers: readonly string[];
}

/**
 * The one seam between kubefn and a platform, as Hono's `app.fetch` is: settings and ports in,
 * `{ fetch, consume, sweep, ingest }` out. An adapter parses its environment into
 * {@link KubefnSettings}, binds its ports, and maps its event shapes onto the four calls.
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
  // Unset only where intake is off too (no audit token, no relay secret): the sweep then finds
  // every change at its drift period, a forged status included.
  const seal = statusSealFrom(settings);
  if (seal) ctx.seal = seal;
  const derivedFrom = derivedSealKeySource(settings);
  if (derivedFrom) {
    ctx.log.warn(
      `the status seal's key is derived from ${derivedFrom}, which whoever writes into that intake channel also holds (with a stolen kubefn token they could seal a status of their own): set STATUS_SEAL_KEY (kubefn install, the chart and the Lambda template make one)`,
    );
  }
  // Bodies on a platform queue carry kubefn's MAC; without a key none travel there (passes read
  // what they need) and probes run in the sweep, where no queue carries their objects.
  const inProcess = ports.inProcessQueue === true;
  const mac = inProcess ? undefined : messageAuthenticatorFrom(settings);
  const bodiesTravel = inProcess || mac !== undefined;
  if (!bodiesTravel && settings.probeShardSize) {
    ctx.log.warn(
      "STATUS_SEAL_KEY is not set: probes run in the sweep instead of probe shards (a shard's objects on the queue need kubefn's MAC, keyed from STATUS_SEAL_KEY)",
      { probeShardSize: settings.probeShardSize },
    );
  }
  /** A message as it goes on the queue: its bodies signed, or left off when they cannot be. */
  const outgoing = async (message: Message): Promise<Message> => {
    if (inProcess || !hasBodies(message)) return message;
    return mac ? mac.sign(message) : withoutBodies(message);
  };
  const ops =
    operators ??
    createOperators({
      prober: ports.prober,
      sweepPeriodSeconds: settings.sweepPeriodSeconds,
      probeConcurrency: settings.probeConcurrency,
      ...(settings.probeNamespaceConcurrency
        ? { probeNamespaceConcurrency: settings.probeNamespaceConcurrency }
        : {}),
      ...(settings.probeShardSize && bodiesTravel ? { probeShardSize: settings.probeShardSize } : {}),
      ...(ports.probeSlots ? { probeSlotScope: ports.probeSlots } : {}),
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
  for (const { operator, problem } of stoppedBySettings(settings.operators)) {
    ctx.log.error(
      "an operator's settings are invalid: its primaries are not reconciled, and each says so on Ready; the other operators run",
      { controller: operator, issues: problem },
    );
  }
  for (const { controller, problems } of ops.refused ?? []) {
    ctx.log.error("an operator did not start: its primaries say so on Ready; the other operators run", {
      controller,
      problems,
    });
  }
  // kubefn's containment: no pass, job or sweep runs while its admission policies are missing.
  const admission = createAdmissionGate({
    kube: ctx.kube,
    clock: ctx.clock,
    log: ctx.log,
    metrics: ctx.metrics,
    recheckSeconds: settings.admissionRecheckSeconds,
    onClosed: (problems) =>
      invocationStateChanges(ports.stateChanges, 1, ctx)?.publish([
        admissionGateClosed(problems, ctx.clock.now()),
      ]),
  });
  // Sweeps held back by the gate missed what changed meanwhile without an event reaching a pass
  // (objects created then): the first sweep after it opens sends every object, as a host's first.
  let sweepsMissed = false;
  /**
   * A pass or job put back unchanged (no attempt spent) until the gate asks again: a re-check
   * period, or seconds when the API server did not answer the check. The check logged why. One
   * the queue would not take back is retried by the platform instead (an attempt spent), and says
   * so: never a silent `ack: false`.
   */
  const deferred = async (
    message: Parameters<Queue["send"]>[0][number],
    attempts: number,
  ): Promise<Verdict> => {
    ctx.metrics.count("kubefn_messages_deferred_total", { reason: "AdmissionPoliciesNotReady" });
    const retryAfterSeconds = admission.waitSeconds();
    try {
      await ctx.queue.send([message], retryAfterSeconds);
      return { ack: true };
    } catch (err) {
      ctx.log.warn("a message held back by the admission gate could not be put back on the queue; retried", {
        request: message.request,
        attempts,
        retryAfterSeconds,
        error: String(err),
      });
      ctx.metrics.count("kubefn_messages_retried_total", { reason: "defer-failed" });
      return { ack: false, retryAfterSeconds };
    }
  };
  const passes = new PassHistory();
  const hop = (on: Context, parent: string | undefined, kind: HopKind) =>
    tracedHop(on, parent, kind, ports.spans, outgoing);
  // Each intake batch starts a trace of its own, which its passes continue; so does each send of
  // the operators' own routes.
  const intakeCtx: Context = {
    ...ctx,
    queue: sealingQueue(ctx.queue, () => traceFrom(undefined).traceparent, outgoing),
  };
  const intakeBatch = (): IntakeBatch => {
    const batch = hop(ctx, undefined, "intake");
    return {
      log: batch.ctx.log,
      enqueue: (messages) => batch.ctx.queue.send(messages),
      end: ({ source, enqueued, failed }) =>
        batch.end({ result: failed ? "error" : "done", source, enqueued }),
    };
  };
  const app = createFunctionsApp(
    intakeCtx,
    ops,
    ports.intakeCredentials ? { ...settings, credentials: ports.intakeCredentials } : settings,
    intakeBatch,
  );
  const kinds = new Map(ops.registry.controllers.map((c) => [c.name, c.for.kind]));
  const primaries = ops.registry.controllers.map((c) => ({ controller: c.name, resource: c.for }));
  app.route(
    "/",
    fleetPage(ctx, primaries, passes, {
      access: settings.fleetPage,
      ...(settings.apiToken ? { apiToken: settings.apiToken } : {}),
      admission: () => {
        const state = admission.state();
        return state && { ready: state.report.ready, problems: admissionProblems(state.report) };
      },
    }),
  );
  /** The context of one invocation: its own request budget and shared reads. */
  const invocationContext = (reads?: SweepMemo): Context => ({
    ...ctx,
    ...(ports.invocationKube ? { kube: ports.invocationKube() } : {}),
    memo: reads ?? createSweepMemo(INVOCATION_READ_MAX_AGE_SECONDS * 1000),
    stateChanges: invocationStateChanges(ports.stateChanges, settings.stateChangesPerInvocation, ctx),
  });
  const consumeOne = async (invocation: Context, delivery: Delivery): Promise<Verdict> => {
    const attempts = delivery.attempts ?? 1;
    const envelope = openEnvelope(delivery.body);
    switch (envelope.kind) {
      case "invalid":
        ctx.log.error("queue message is not a kubefn message; dropped", {
          body: describeShape(delivery.body),
        });
        ctx.metrics.count("kubefn_messages_dropped_total", { reason: "invalid" });
        return { ack: true, dropped: true };
      case "newer": {
        const retryAfterSeconds = backoffSeconds(attempts - 1, ctx.random);
        ctx.log.warn("queue message from a newer release; left for a release that reads it", {
          version: envelope.version,
          reads: ENVELOPE_VERSION,
          attempts,
          retryAfterSeconds,
        });
        ctx.metrics.count("kubefn_messages_retried_total", { reason: "newer-release" });
        return { ack: false, retryAfterSeconds };
      }
      case "pass":
      case "job": {
        const authenticated = inProcess
          ? { kind: "authentic" as const, message: envelope.message }
          : await authenticBodies(envelope.message, mac);
        if (authenticated.kind === "refused") {
          ctx.log.error(
            "job's objects do not carry kubefn's MAC; refused (the next sweep plans its work again)",
            {
              request: envelope.message.request,
              task: envelope.message.shard?.task,
            },
          );
          ctx.metrics.count("kubefn_messages_dropped_total", { reason: "unauthenticated" });
          return { ack: true, dropped: true };
        }
        if (authenticated.kind === "stripped") {
          ctx.log.warn("queue message's bodies do not carry kubefn's MAC; the pass reads them itself", {
            request: envelope.message.request,
          });
          ctx.metrics.count("kubefn_message_bodies_stripped_total", {});
        }
        if (!(await admission.open())) return deferred(authenticated.message, attempts);
        const message = authenticated.message;
        const item = hop(invocation, message.traceparent, envelope.kind);
        const itemCtx = item.ctx;
        const { controller } = message.request;
        const request =
          envelope.kind === "job" ? { controller } : { ...message.request, kind: kinds.get(controller) };
        try {
          if (envelope.kind === "job") {
            const job = await runJob(itemCtx, ops.registry, { ...message, shard: envelope.message.shard });
            (job.result === "error" ? itemCtx.log.error : itemCtx.log.info)("job", jobLine(job));
            item.end({ request, result: job.result, task: job.task });
            return { ack: true };
          }
          const pass = await runPass(itemCtx, ops.registry, message);
          passes.record(pass, ctx.clock.now());
          (pass.result === "error" ? itemCtx.log.error : itemCtx.log.info)("pass", passLine(pass));
          item.end({
            request,
            result: pass.result,
            trigger: pass.trigger,
            ...(pass.errorClass ? { errorClass: pass.errorClass } : {}),
          });
          return { ack: true, pass };
        } catch (err) {
          const retryAfterSeconds = backoffSeconds(attempts - 1, ctx.random);
          itemCtx.log.error("pass crashed; redelivering", {
            request: message.request,
            attempts,
            retryAfterSeconds,
            error: String(err),
          });
          ctx.metrics.count("kubefn_messages_retried_total", { reason: "crashed" });
          item.end({ request, result: "error", errorClass: "crashed" });
          return { ack: false, retryAfterSeconds };
        }
      }
      default:
        return assertNever(envelope);
    }
  };
  /**
   * {@link consumeOne}, whose every failure is its own message's: something that throws outside a
   * pass (the gate's check, a port) retries that message, logged and counted, instead of
   * rejecting the delivery, which a platform retries whole and silently (Workers: every message
   * of the batch, `QUEUE kubefn 0/8`, no log line of kubefn's).
   */
  const consumeSettled = async (invocation: Context, delivery: Delivery): Promise<Verdict> => {
    if ((delivery.attempts ?? 1) > 1) {
      // The last delivery was not acked: a retry verdict (logged then), or an invocation that
      // failed or was cancelled before any verdict (workerd: "hung"), which nothing else reports.
      const body = delivery.body as { request?: unknown } | null;
      ctx.log.warn("queue message redelivered: its last delivery was not acked", {
        ...(typeof body === "object" && body !== null && "request" in body ? { request: body.request } : {}),
        attempts: delivery.attempts,
      });
      ctx.metrics.count("kubefn_messages_redelivered_total", {});
    }
    try {
      return await consumeOne(invocation, delivery);
    } catch (err) {
      const attempts = delivery.attempts ?? 1;
      const retryAfterSeconds = backoffSeconds(attempts - 1, ctx.random);
      const body = delivery.body as { request?: unknown } | null;
      ctx.log.error("queue delivery failed before its pass or job ran; redelivering", {
        ...(typeof body === "object" && body !== null && "request" in body ? { request: body.request } : {}),
        attempts,
        retryAfterSeconds,
        error: String(err),
      });
      ctx.metrics.count("kubefn_messages_retried_total", { reason: "crashed" });
      return { ack: false, retryAfterSeconds };
    }
  };
  return {
    controllers: ops.registry.controllers.map((c) => c.name),
    fetch: (request) => app.fetch(request),
    async consume(deliveries, options = {}) {
      const invocation = invocationContext(options.reads);
      return mapWithConcurrency(deliveries, settings.passConcurrency, (delivery) =>
        consumeSettled(invocation, delivery),
      );
    },
    async sweep(options = {}) {
      if (!ports.apiFailing?.()) {
        if (!(await admission.open())) {
          ctx.metrics.count("kubefn_sweep_held_back_total", {});
          // A check the API server did not answer is an outage, as an open circuit is (below).
          if (!admission.state()?.report.unanswered) sweepsMissed = true;
          return { controllers: {}, tasks: {}, durationMs: 0, heldBack: true };
        }
        if (sweepsMissed) options = { ...options, full: true };
        sweepsMissed = false;
      }
      if (ports.apiFailing?.()) {
        // Each message would only run into the open circuit; the next sweep sends what is due.
        ctx.log.warn("sweep held back: the API server is failing", {});
        ctx.metrics.count("kubefn_sweep_held_back_total", {});
        return { controllers: {}, tasks: {}, durationMs: 0, heldBack: true };
      }
      const sweep = hop(invocationContext(), undefined, "sweep");
      try {
        const summary = await runSweep(sweep.ctx, ops.registry, ops.sweepTasks, {
          shardSize: 100,
          attachListed: bodiesTravel,
          periodSeconds: settings.sweepPeriodSeconds,
          ...(options.full ? { full: true } : {}),
          ...(options.scheduledTime ? { scheduledAt: options.scheduledTime } : {}),
        });
        sweep.ctx.log.info("sweep", sweepLine(summary));
        sweep.end({ result: "done" });
        return summary;
      } catch (err) {
        sweep.end({ result: "error" });
        throw err;
      }
    },
    async ingest(delivery) {
      const batch = hop(ctx, undefined, "intake");
      const source = "cloudwatch-logs";
      let result: CloudWatchLogsResult;
      try {
        result = await intakeCloudWatchLogs(delivery.data, {
          map: mapWithRegistry(batch.ctx, ops.registry, settings.selfUsernames),
          enqueue: (messages) => batch.ctx.queue.send(messages),
          log: batch.ctx.log,
          metrics: ctx.metrics,
          maxBytes: settings.maxBodyBytes,
        });
      } catch (err) {
        batch.end({ result: "error", source });
        throw err;
      }
      batch.ctx.log.info(
        "audit log delivery",
        "acknowledged" in result ? { ...result } : { enqueued: result.enqueued, ...result.counts },
      );
      batch.end({ result: "done", source, enqueued: "acknowledged" in result ? 0 : result.enqueued });
      return result;
    },
  };
}

/**
 * One hop of a chain: a child span of `parent` (a message's `traceparent`), or a new trace. Its
 * context's log lines carry the trace id and this hop's span id (a pass's id); the messages it
 * sends carry the envelope version and its `traceparent`. `spans` is told as it starts, and `end`
 * tells it how the hop ended (nothing when there is no span sink).
 */
function tracedHop(
  ctx: Context,
  parent: string | undefined,
  kind: HopKind,
  spans: Spans | undefined,
  outgoing: (message: Message) => Promise<Message>,
): { ctx: Context; end: (end: HopEnd) => void } {
  const trace = traceFrom(parent);
  // `span` names this hop (a pass, a job, a sweep, an intake batch): every line it writes has both.
  const fields = { trace: trace.traceId, span: trace.spanId };
  const with_ = (f?: Record<string, unknown>) => (f ? { ...f, ...fields } : fields);
  return {
    ctx: {
      ...ctx,
      log: {
        info: (msg, f) => ctx.log.info(msg, with_(f)),
        warn: (msg, f) => ctx.log.warn(msg, with_(f)),
        error: (msg, f) => ctx.log.error(msg, with_(f)),
      },
      queue: sealingQueue(ctx.queue, () => trace.traceparent, outgoing),
    },
    end: spans ? spans.start(kind, trace) : () => undefined,
  };
}

/**
 * `queue`, sending each batch fitted to its limit and sealed: the envelope version, the
 * `traceparent` of `traceOf()`, and each message as `outgoing` makes it (its bodies signed).
 * Fitted before signing: each piece of a cut shard is signed whole.
 */
function sealingQueue(
  queue: Context["queue"],
  traceOf: () => string,
  outgoing: (message: Message) => Promise<Message>,
): Context["queue"] {
  return {
    send: async (messages, delaySeconds) => {
      const traceparent = traceOf();
      return queue.send(
        await Promise.all(
          fitToQueue(messages, queue.maxMessageBytes).map((m) => outgoing(sealed(m, traceparent))),
        ),
        delaySeconds,
      );
    },
    ...(queue.maxMessageBytes === undefined ? {} : { maxMessageBytes: queue.maxMessageBytes }),
  };
}

/** The fields of a `job` log line: `shard` holds what the job's handler counted. */
export function jobLine(r: JobResult): Record<string, unknown> {
  return { key: r.key, task: r.task, result: r.result, ms: Math.round(r.durationMs), shard: r.counts };
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
