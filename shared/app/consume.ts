import { mapWithConcurrency } from "../concurrency/index.ts";
import { assertNever, describeShape } from "../guards/index.ts";
import {
  authenticBodies,
  backoffSeconds,
  type Context,
  clusterOf,
  createSweepMemo,
  ENVELOPE_VERSION,
  INVOCATION_READ_MAX_AGE_SECONDS,
  type JobMessage,
  type JobResult,
  jobKey,
  type Message,
  openEnvelope,
  type PassMessage,
  type PassResult,
  runJob,
  runPass,
  type SweepMemo,
} from "../runtime/index.ts";
import type { Core } from "./build.ts";
import type { Delivery, Kubefn, Verdict } from "./ports.ts";

/**
 * The core's `consume`: each delivery opened, its bodies checked, held back while the admission
 * gate is shut, then run as the pass or job it is. Deliveries of one call (and of calls with the
 * same `batch` object) share one invocation: its request budget and reads of shared state.
 */
export function createConsume(core: Core): Kubefn["consume"] {
  const batchReads = new WeakMap<object, SweepMemo>();
  const readsOf = (batch: object) => {
    const memo = batchReads.get(batch) ?? createSweepMemo(INVOCATION_READ_MAX_AGE_SECONDS * 1000);
    batchReads.set(batch, memo);
    return memo;
  };
  return async (deliveries, options = {}) => {
    const invocation = core.invocation(options.batch ? readsOf(options.batch) : undefined);
    return mapWithConcurrency(deliveries, core.settings.passConcurrency, (delivery) =>
      consumeSettled(core, invocation, delivery),
    );
  };
}

/**
 * {@link consumeOne}, whose every failure is its own message's: something that throws outside a
 * pass (the gate's check, a port) retries that message, logged and counted, instead of
 * rejecting the delivery, which a platform retries whole and silently (Workers: every message
 * of the batch, `QUEUE kubefn 0/8`, no log line of kubefn's).
 */
async function consumeSettled(core: Core, invocation: Context, delivery: Delivery): Promise<Verdict> {
  const { ctx } = core;
  const attempts = delivery.attempts ?? 1;
  if (attempts > 1) {
    // The last delivery was not acked: a retry verdict (logged then), or an invocation that
    // failed or was cancelled before any verdict (workerd: "hung"), which nothing else reports.
    ctx.log.warn("queue message redelivered: its last delivery was not acked", {
      ...whatOf(delivery.body),
      attempts,
    });
    ctx.metrics.count("kubefn_messages_redelivered_total", {});
  }
  try {
    return await consumeOne(core, invocation, delivery);
  } catch (err) {
    const retryAfterSeconds = backoffSeconds(attempts - 1, ctx.random);
    ctx.log.error("queue delivery failed before its pass or job ran; redelivering", {
      ...whatOf(delivery.body),
      attempts,
      retryAfterSeconds,
      error: String(err),
    });
    ctx.metrics.count("kubefn_messages_retried_total", { reason: "crashed" });
    return { ack: false, retryAfterSeconds };
  }
}

async function consumeOne(core: Core, invocation: Context, delivery: Delivery): Promise<Verdict> {
  const { ctx } = core;
  const attempts = delivery.attempts ?? 1;
  const envelope = openEnvelope(delivery.body);
  switch (envelope.kind) {
    case "invalid":
      ctx.log.error("queue message is not a kubefn message; dropped", { body: describeShape(delivery.body) });
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
      if (clusterOf(envelope.message) !== core.cluster) {
        // A key names an object of one cluster: run against another's API server it would act
        // on a namesake. The platform routes each message to its cluster's kubefn.
        ctx.log.error("queue message is another cluster's; dropped", {
          ...whatOf(envelope.message),
          cluster: clusterOf(envelope.message),
          reconciles: core.cluster,
        });
        ctx.metrics.count("kubefn_messages_dropped_total", { reason: "other-cluster" });
        return { ack: true, dropped: true };
      }
      const authenticated = core.inProcess
        ? { kind: "authentic" as const, message: envelope.message }
        : await authenticBodies(envelope.message, core.mac);
      if (authenticated.kind === "refused") {
        ctx.log.error(
          "job's objects do not carry kubefn's MAC; refused (the next sweep plans its work again)",
          {
            ...whatOf(envelope.message),
          },
        );
        ctx.metrics.count("kubefn_messages_dropped_total", { reason: "unauthenticated" });
        return { ack: true, dropped: true };
      }
      if (authenticated.kind === "stripped") {
        ctx.log.warn("queue message's bodies do not carry kubefn's MAC; the pass reads them itself", {
          request: authenticated.message.request,
        });
        ctx.metrics.count("kubefn_message_bodies_stripped_total", {});
      }
      if (!(await core.admission.open())) return deferred(core, authenticated.message, attempts);
      const message = authenticated.message;
      return message.kind === "job"
        ? consumeJob(core, invocation, message)
        : consumePass(core, invocation, message, attempts);
    }
    default:
      return assertNever(envelope);
  }
}

async function consumeJob(core: Core, invocation: Context, message: JobMessage): Promise<Verdict> {
  const item = core.hop(invocation, message.traceparent, "job");
  const request = { controller: message.job.controller };
  try {
    const job = await runJob(item.ctx, core.ops.registry, message);
    (job.result === "error" ? item.ctx.log.error : item.ctx.log.info)("job", jobLine(job));
    item.end({ request, result: job.result, task: job.task });
    return { ack: true };
  } catch (err) {
    // runJob never throws for a failed handler; only a log sink or a span sink does.
    return crashed(core, item.ctx, { job: jobKey(message.job) }, err, 1, () =>
      item.end({ request, result: "error", errorClass: "crashed" }),
    );
  }
}

async function consumePass(
  core: Core,
  invocation: Context,
  message: PassMessage,
  attempts: number,
): Promise<Verdict> {
  const item = core.hop(invocation, message.traceparent, "pass");
  const kind = core.ops.registry.controller(message.request.controller)?.for.kind;
  const request = { ...message.request, kind };
  try {
    const pass = await runPass(item.ctx, core.ops.registry, message);
    core.passes.record(pass, core.ctx.clock.now());
    (pass.result === "error" ? item.ctx.log.error : item.ctx.log.info)("pass", passLine(pass));
    item.end({
      request,
      result: pass.result,
      trigger: pass.trigger,
      ...(pass.errorClass ? { errorClass: pass.errorClass } : {}),
    });
    return { ack: true, pass };
  } catch (err) {
    return crashed(core, item.ctx, { request: message.request }, err, attempts, () =>
      item.end({ request, result: "error", errorClass: "crashed" }),
    );
  }
}

/** A pass or job that threw: redelivered after a backoff, logged and counted. */
function crashed(
  core: Core,
  itemCtx: Context,
  what: Record<string, unknown>,
  err: unknown,
  attempts: number,
  end: () => void,
): Verdict {
  const retryAfterSeconds = backoffSeconds(attempts - 1, core.ctx.random);
  itemCtx.log.error("pass crashed; redelivering", {
    ...what,
    attempts,
    retryAfterSeconds,
    error: String(err),
  });
  core.ctx.metrics.count("kubefn_messages_retried_total", { reason: "crashed" });
  end();
  return { ack: false, retryAfterSeconds };
}

/**
 * A pass or job put back unchanged (no attempt spent) until the gate asks again: a re-check
 * period, or seconds when the API server did not answer the check. The check logged why. One
 * the queue would not take back is retried by the platform instead (an attempt spent), and says
 * so: never a silent `ack: false`.
 */
async function deferred(core: Core, message: Message, attempts: number): Promise<Verdict> {
  const { ctx, admission } = core;
  ctx.metrics.count("kubefn_messages_deferred_total", { reason: "AdmissionPoliciesNotReady" });
  const retryAfterSeconds = admission.waitSeconds();
  try {
    await ctx.queue.send([message], retryAfterSeconds);
    return { ack: true };
  } catch (err) {
    ctx.log.warn("a message held back by the admission gate could not be put back on the queue; retried", {
      ...whatOf(message),
      attempts,
      retryAfterSeconds,
      error: String(err),
    });
    ctx.metrics.count("kubefn_messages_retried_total", { reason: "defer-failed" });
    return { ack: false, retryAfterSeconds };
  }
}

/** What a log line names of a delivered body: its request, or a job's key. */
function whatOf(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null) return {};
  const envelope = openEnvelope(body);
  if (envelope.kind === "job") return { job: jobKey(envelope.message.job) };
  return "request" in body ? { request: body.request } : {};
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
