import { assertNever, errorMessage, isRecord } from "../../guards/index.ts";
import {
  classifyError,
  conditionsOf,
  createEventRecorder,
  diffMergePatch,
  type ErrorClass,
  type ErrorClassName,
  isNotFound,
  type Kube,
  type KubeObject,
  type ObjectKey,
  type Resource,
} from "../../kube/index.ts";
import {
  type Context,
  describeTrigger,
  type PassMessage,
  type Request,
  requestKey,
  SEAL_FIELD,
} from "../core/index.ts";
import {
  applyErrorPolicy,
  applyReadiness,
  type ControllerDefinition,
  createdReason,
  done,
  type ErrorPolicy,
  failed,
  groupOf,
  isLatched,
  type Outcome,
  type PassContext,
  QUOTA_RETRY_SECONDS,
  type Registry,
} from "../definition/index.ts";
import { backoffSeconds } from "./backoff.ts";
import { conditionEvents } from "./condition-events.ts";
import { addFinalizerUnread, FINALIZER_DRIFT, guard, runController } from "./finalize.ts";

/**
 * Conflicts requeue at once (delay 0) this many times in a row; after that they back off like
 * transient errors. The attempt grows by one per conflict, so a hot conflict loop (two writers
 * fighting over a field) is bounded instead of spinning the queue.
 */
export const IMMEDIATE_CONFLICT_RETRIES = 3;
/**
 * Listed objects older than this do not answer a pass's GETs: a message that waited in a queue
 * (delayed, redelivered) reads them afresh.
 */
export const LISTED_MAX_AGE_SECONDS = 30;

/** How a pass ended, for adapters to print and for `kubefn_passes_total{result}`. */
export type PassResultKind = "done" | "awaitSweep" | "requeue" | "error" | "latched";

/** The summary of one pass. */
export interface PassResult {
  /** `controller/namespace/name`. */
  key: string;
  result: PassResultKind;
  /** Why the pass ran: `audit`, `relay`, `follow-up`, `drift:<reason>`, `safety-net`, `start`. */
  trigger: string;
  /** The primary did not exist (reconcileAbsent ran, or nothing did). */
  absent: boolean;
  /** Whether the status subresource was patched. */
  wroteStatus: boolean;
  /** Delay of the follow-up sent, in seconds; undefined when none was sent. */
  followUpSeconds?: number;
  /** The message was for an earlier object of this name (another UID); it was dropped. */
  staleUid?: boolean;
  /** Set when `result` is "error". */
  errorClass?: ErrorClassName;
  errorReason?: string;
  durationMs: number;
}

/**
 * One reconcile pass for one message: read the primary from the API server, run the
 * controller on a private copy, apply its error policy and then its summary (`readiness`: Ready,
 * Reconciling, Stalled), patch the status once if it changed (merge patch guarded by the
 * resourceVersion read, with `status.observedGeneration`), and turn the Outcome into at most one
 * follow-up through `ctx.queue`. The controller's finalizer (`ControllerDefinition.finalizer`) is
 * the runtime's: added before reconcile, `cleanup` instead of reconcile on deletion, removed once
 * cleanup is done; the metadata an Outcome carries is written before the status
 * (shared/runtime/pass/finalize.ts).
 *
 * | outcome | follow-up |
 * | --- | --- |
 * | done, awaitSweep | none (the sweep's drift pass is the next look) |
 * | requeueAfter(s) | s, attempt 0 (none when s ≥ the resync: reported as awaitSweep) |
 * | transient error | backoffSeconds(attempt) (1 s · 2^n, cap 300, equal jitter, ≥ Retry-After), attempt + 1 |
 * | conflict (also a Conflict on the status patch) | 0 for the first {@link IMMEDIATE_CONFLICT_RETRIES}, then backoff; attempt + 1 |
 * | quota | the error policy's `quota.retrySeconds` ({@link QUOTA_RETRY_SECONDS}), attempt 0 |
 * | permanent | none |
 *
 * The controller's {@link ErrorPolicy} decides what an error writes (the latch, the quota
 * condition) before the status write.
 *
 * A follow-up as late as the controller's `resyncSeconds` or later is not sent: the sweep comes
 * first.
 * Never throws for a failed pass: the failure is logged at error level with its key and class,
 * counted, and expressed as the follow-up.
 *
 * With `ctx.seal`, every status written is sealed; a status read whose seal does not verify is
 * logged, counted, rewritten from the controller's view and reported with a Warning Event
 * ({@link FOREIGN_STATUS_REASON}).
 *
 * Caveats: the latch (the policy's latch condition True at the current generation) makes a pass a
 * no-op without calling the controller (result `latched`) — only on a sealed status.
 * A failed follow-up send is logged and counted but not thrown: the sweep covers a lost message.
 *
 * @example
 * const result = await runPass(ctx, registry, { request: { controller: "proxy", namespace: "ns", name: "p1" }, attempt: 0 });
 * log.info("pass", result);
 */
export async function runPass(ctx: Context, registry: Registry, message: PassMessage): Promise<PassResult> {
  const started = performance.now();
  const { request } = message;
  const key = requestKey(request);
  const attempt = Number.isInteger(message.attempt) && message.attempt > 0 ? message.attempt : 0;
  const def = registry.controller(request.controller);
  const summary: PassResult = {
    key,
    result: "done",
    trigger: describeTrigger(message.trigger),
    absent: false,
    wroteStatus: false,
    durationMs: 0,
  };

  const finish = (): PassResult => {
    summary.durationMs = Math.round((performance.now() - started) * 100) / 100;
    const controller = def?.name ?? "unknown";
    ctx.metrics.count("kubefn_passes_total", { controller, result: summary.result });
    ctx.metrics.count("kubefn_pass_triggers_total", {
      controller,
      trigger: message.trigger?.kind ?? "unknown",
      reason: message.trigger?.reason ?? "",
    });
    ctx.metrics.observe("kubefn_pass_duration_seconds", summary.durationMs / 1000, { controller });
    const result = reconcileResultOf(summary);
    ctx.metrics.count("controller_runtime_reconcile_total", { controller, result });
    if (result === "error") ctx.metrics.count("controller_runtime_reconcile_errors_total", { controller });
    ctx.metrics.observe("controller_runtime_reconcile_time_seconds", summary.durationMs / 1000, {
      controller,
    });
    return summary;
  };

  if (!def) {
    fail(
      ctx,
      summary,
      request,
      "unknown",
      attempt,
      new Error(`no controller "${request.controller}" is registered`),
      {
        class: "permanent",
        reason: "UnknownController",
      },
    );
    return finish();
  }

  const events = createEventRecorder(ctx.kube, {
    controller: `kubefn.dev/${def.name}`,
    now: () => ctx.clock.now(),
    onError: (err, event) => {
      ctx.log.warn("event not recorded", { key, reason: event.reason, error: String(err) });
      ctx.metrics.count("kubefn_event_errors_total", { controller: def.name });
    },
  });
  const swept = message.listed?.length && isFresh(message, ctx.clock.now());
  const passCtx: PassContext = {
    ...ctx,
    // Only the sweep's drift messages carry listed objects, and only drift triggers a reason.
    ...(swept ? { kube: listedReads(ctx.kube, message.listed!), drift: message.trigger?.reason } : {}),
    ...(message.trigger?.kind === "follow-up" && message.trigger.reason && attempt === 0
      ? { followUp: message.trigger.reason }
      : {}),
    ...((message.trigger?.kind === "audit" || message.trigger?.kind === "relay") &&
    message.trigger.reason &&
    attempt === 0
      ? { event: message.trigger.reason }
      : {}),
    request,
    attempt,
    events,
  };
  const objectKey: ObjectKey = def.for.namespaced
    ? { namespace: request.namespace ?? "", name: request.name }
    : { name: request.name };

  // The primary is always read: no body from a message stands in for it, so the spec every
  // write (derived objects included, which its resourceVersion does not guard) is made from is
  // the one the API server stores now, never an older one a queue held back. On the pass a
  // creation brought, the finalizer patch's answer is that read (`FinalizerDeclaration.addUnread`).
  let observed: KubeObject | undefined;
  try {
    // A creation's event, or the sweep finding a live object without the finalizer (under load
    // the sweep may come first): both name the UID the write tests.
    const reason = attempt === 0 ? message.trigger?.reason : undefined;
    const unread =
      def.finalizer?.addUnread === true &&
      message.uid !== undefined &&
      (((message.trigger?.kind === "audit" || message.trigger?.kind === "relay") &&
        reason === createdReason) ||
        (message.trigger?.kind === "drift" && reason === FINALIZER_DRIFT));
    if (unread)
      observed = await addFinalizerUnread(ctx.kube, def.for, objectKey, message.uid!, def.finalizer!);
    observed ??= await ctx.kube.get(def.for, objectKey);
  } catch (err) {
    if (!isNotFound(err)) {
      await settle(ctx, def, summary, message, attempt, failed(err));
      return finish();
    }
  }

  if (!observed) {
    summary.absent = true;
    const outcome = def.reconcileAbsent ? await guard(() => def.reconcileAbsent!(passCtx)) : done();
    await settle(ctx, def, summary, message, attempt, outcome);
    return finish();
  }

  if (
    message.uid !== undefined &&
    observed.metadata.uid !== undefined &&
    observed.metadata.uid !== message.uid
  ) {
    // Decided for an object that has since been deleted and recreated under the same name: none
    // of it applies to the new one, whose own events and sweep bring its passes.
    summary.result = "done";
    summary.staleUid = true;
    ctx.metrics.count("kubefn_stale_messages_total", { controller: def.name });
    return finish();
  }

  // A latch is kubefn's own record only when sealed: a forged latch condition would freeze the
  // object, and an unsealed one would never be sealed (the sweep would send a pass every period).
  const verdict = ctx.seal ? await ctx.seal.verify(observed) : "sealed";
  const foreign = verdict === "foreign";
  if (verdict === "sealed" && isLatched(def.errorPolicy, observed)) {
    summary.result = "latched";
    return finish();
  }
  if (foreign) reportForeignStatus(ctx, def.name, key, observed);

  const copy = structuredClone(observed);
  // The controller's finalizer is kept here (added before reconcile, cleanup on deletion, removed
  // once cleanup is done) with the metadata its Outcome carries; see shared/runtime/pass/finalize.ts.
  const step = await runController(passCtx, def, copy);
  let outcome = step.outcome;
  if (step.final) {
    await settle(
      ctx,
      def,
      summary,
      { ...message, uid: observed.metadata.uid ?? message.uid },
      attempt,
      outcome,
    );
    return finish();
  }
  applyErrorPolicy(def.errorPolicy, copy, outcome, ctx.clock.now());
  const readiness = def.readiness?.(copy, outcome);
  if (readiness) applyReadiness(copy, readiness, ctx.clock.now());
  if (def.observedGeneration !== false && typeof copy.metadata.generation === "number") {
    const status = isRecord(copy.status) ? copy.status : {};
    status.observedGeneration = copy.metadata.generation;
    copy.status = status;
  }

  if (ctx.seal && isRecord(copy.status)) copy.status[SEAL_FIELD] = await ctx.seal.seal(copy, copy.status);

  const patch = diffMergePatch(observed.status, copy.status);
  if (patch !== undefined) {
    try {
      await ctx.kube.patchStatus(def.for, objectKey, {
        type: "merge",
        // The pass's own metadata writes (finalizer, annotations) moved the resourceVersion onto
        // the copy: guard with that, else the observed one.
        body: {
          metadata: { resourceVersion: copy.metadata.resourceVersion ?? observed.metadata.resourceVersion },
          status: patch,
        },
      });
      summary.wroteStatus = true;
      for (const event of conditionEvents(def, conditionsOf(observed), conditionsOf(copy))) {
        await events.record(copy, event);
      }
      // A change is news only from a status kubefn wrote: one forged to look otherwise (a
      // tenant's Healthy=True over kubefn's False) would otherwise page again when rewritten.
      if (ctx.stateChanges && def.stateChanges && verdict === "sealed") {
        await ctx.stateChanges.publish(def.stateChanges(observed, copy, ctx.clock.now()));
      }
      if (foreign) {
        await events.record(copy, {
          type: "Warning",
          reason: FOREIGN_STATUS_REASON,
          action: "Reconcile",
          note: `status ${describeStatusWrite(observed)} was not written by kubefn (its seal does not verify): rewritten from what kubefn observes`,
        });
      }
    } catch (err) {
      // The write failure decides what happens next: a Conflict is "requeue now" through the
      // conflict class and the next pass recomputes everything. NotFound means the object went
      // away mid-pass; its deletion event brings the next pass.
      if (isNotFound(err)) {
        summary.absent = true;
        outcome = done();
      } else {
        outcome = failed(err);
      }
    }
  }

  await settle(
    ctx,
    def,
    summary,
    { ...message, uid: observed.metadata.uid ?? message.uid },
    attempt,
    outcome,
  );
  return finish();
}

/** The Warning Event's reason when a pass rewrites a status someone else wrote. */
export const FOREIGN_STATUS_REASON = "ForeignStatusWrite";

/**
 * Logs and counts a status whose seal does not verify: written with kubefn's identity (or one the
 * status writers' list admits) by something that does not hold the seal key — a stolen token.
 */
function reportForeignStatus(ctx: Context, controller: string, key: string, observed: KubeObject): void {
  const write = lastStatusWrite(observed);
  ctx.log.warn("status not written by kubefn: its seal does not verify; the pass rewrites it", {
    key,
    resourceVersion: observed.metadata.resourceVersion,
    ...(write ? { manager: write.manager, operation: write.operation, at: write.time } : {}),
  });
  ctx.metrics.count("kubefn_foreign_status_total", { controller });
}

/** The latest managedFields entry of the status subresource: who wrote the status, when. */
function lastStatusWrite(
  object: KubeObject,
): { manager?: string; operation?: string; time?: string } | undefined {
  const fields = (object.metadata as { managedFields?: unknown }).managedFields;
  if (!Array.isArray(fields)) return undefined;
  let last: { manager?: string; operation?: string; time?: string } | undefined;
  for (const f of fields) {
    if (!isRecord(f) || f.subresource !== "status") continue;
    const time = typeof f.time === "string" ? f.time : undefined;
    if (!last || (time ?? "") >= (last.time ?? "")) {
      last = {
        ...(typeof f.manager === "string" ? { manager: f.manager } : {}),
        ...(typeof f.operation === "string" ? { operation: f.operation } : {}),
        ...(time ? { time } : {}),
      };
    }
  }
  return last;
}

/** `at resourceVersion N (by <manager> at <time>)`, for the Warning Event. */
function describeStatusWrite(observed: KubeObject): string {
  const write = lastStatusWrite(observed);
  const by = write?.manager
    ? ` by field manager "${write.manager}"${write.time ? ` at ${write.time}` : ""}`
    : "";
  return `at resourceVersion ${observed.metadata.resourceVersion ?? "?"}${by}`;
}

/** controller-runtime's `result` label values of `controller_runtime_reconcile_total`. */
export const reconcileResults = ["success", "error", "requeue", "requeue_after"] as const;
export type ReconcileResult = (typeof reconcileResults)[number];

/**
 * A pass's result as controller-runtime counts a reconcile (pure): an error is `error` whatever
 * follows it; a requeue sent at once is `requeue`, one sent later `requeue_after`; everything else
 * (done, awaitSweep, latched, a requeue left to the sweep) is `success`.
 *
 * Caveats: probe shards are jobs (runJob), not reconciles, and are not counted under these names
 * (`kubefn_passes_total` and `kubefn_probes_total` count them).
 */
export function reconcileResultOf(summary: Pick<PassResult, "result" | "followUpSeconds">): ReconcileResult {
  switch (summary.result) {
    case "error":
      return "error";
    case "requeue":
      return summary.followUpSeconds === 0 ? "requeue" : "requeue_after";
    case "done":
    case "awaitSweep":
    case "latched":
      return "success";
    default:
      return assertNever(summary.result);
  }
}

/** A follow-up message's delay and the attempt it carries. */
export interface FollowUp {
  delaySeconds: number;
  attempt: number;
}

/**
 * The follow-up an Outcome asks for, before the resync limit is applied (pure; see the table on
 * {@link runPass}). `undefined` for done and for permanent errors.
 */
export function followUpFor(
  outcome: Outcome,
  attempt: number,
  random: () => number,
  quotaRetrySeconds = QUOTA_RETRY_SECONDS,
): FollowUp | undefined {
  switch (outcome.kind) {
    case "done":
    case "awaitSweep":
      return undefined;
    case "requeue":
      return { delaySeconds: Math.ceil(outcome.afterSeconds ?? 0), attempt: 0 };
    case "error": {
      const { class: cls, retryAfterSeconds } = classifyError(outcome.error);
      switch (cls) {
        case "transient":
          return {
            delaySeconds: backoffSeconds(
              attempt,
              random,
              retryAfterSeconds === undefined ? {} : { retryAfter: retryAfterSeconds },
            ),
            attempt: attempt + 1,
          };
        case "conflict":
          return {
            delaySeconds:
              attempt < IMMEDIATE_CONFLICT_RETRIES
                ? 0
                : backoffSeconds(attempt - IMMEDIATE_CONFLICT_RETRIES, random),
            attempt: attempt + 1,
          };
        case "quota":
          return {
            delaySeconds: Math.max(quotaRetrySeconds, Math.ceil(retryAfterSeconds ?? 0)),
            attempt: 0,
          };
        case "permanent":
          return undefined;
        default:
          return assertNever(cls);
      }
    }
    default:
      return assertNever(outcome.kind);
  }
}

async function settle(
  ctx: Context,
  def: ControllerDefinition,
  summary: PassResult,
  message: Pick<PassMessage, "request" | "uid">,
  attempt: number,
  outcome: Outcome,
): Promise<void> {
  const { request } = message;
  const next = followUpFor(outcome, attempt, ctx.random, def.errorPolicy?.quota?.retrySeconds);
  if (outcome.kind === "error") {
    fail(ctx, summary, request, def.name, attempt, outcome.error, classifyError(outcome.error));
  } else {
    summary.result = outcome.kind;
  }
  // A follow-up as late as the drift interval would only duplicate the sweep's own visit; sent
  // anyway, every drift pass would start one more self-perpetuating chain of them. Registration
  // refuses declared requeues that late; one computed at run time waits for the sweep, visibly.
  if (next && outcome.kind === "requeue" && next.delaySeconds >= def.resyncSeconds)
    summary.result = "awaitSweep";
  if (!next || next.delaySeconds >= def.resyncSeconds) return;
  try {
    const uid = message.uid === undefined ? {} : { uid: message.uid };
    await ctx.queue.send(
      [
        {
          request,
          attempt: next.attempt,
          ...uid,
          trigger: {
            kind: "follow-up",
            ...(outcome.kind === "requeue" && outcome.reason ? { reason: outcome.reason } : {}),
          },
        },
      ],
      next.delaySeconds,
    );
    summary.followUpSeconds = next.delaySeconds;
  } catch (err) {
    ctx.log.error("follow-up not sent; the sweep will revisit", { key: summary.key, error: String(err) });
    ctx.metrics.count("kubefn_followup_errors_total", { controller: def.name });
  }
}

function fail(
  ctx: Context,
  summary: PassResult,
  request: Request,
  controller: string,
  attempt: number,
  error: unknown,
  cls: ErrorClass,
): void {
  summary.result = "error";
  summary.errorClass = cls.class;
  summary.errorReason = cls.reason;
  ctx.log.error("pass failed", {
    key: summary.key,
    controller,
    namespace: request.namespace,
    name: request.name,
    class: cls.class,
    reason: cls.reason,
    attempt,
    error: errorMessage(error),
  });
  ctx.metrics.count("kubefn_pass_errors_total", { controller, class: cls.class });
}

/**
 * `kube` whose first GET of each attached object is answered from it (the sweep listed it moments
 * ago); every other call, and a second GET of the same key, goes to the API server.
 */
function listedReads(kube: Kube, listed: readonly KubeObject[]): Kube {
  const held = new Map<string, KubeObject>();
  const id = (group: string, kind: string, key: ObjectKey) =>
    `${group}/${kind}/${key.namespace ?? ""}/${key.name}`;
  for (const o of listed) {
    if (o.metadata?.name) held.set(id(groupOf(o.apiVersion ?? ""), o.kind, o.metadata as ObjectKey), o);
  }
  return Object.assign(Object.create(kube) as Kube, {
    get: async <T extends KubeObject>(res: Resource, key: ObjectKey): Promise<T> => {
      const k = id(res.group, res.kind, key);
      const hit = held.get(k);
      if (!hit) return kube.get<T>(res, key);
      held.delete(k);
      return structuredClone(hit) as T;
    },
  });
}

/** Whether the message's listed objects were listed within {@link LISTED_MAX_AGE_SECONDS}. */
function isFresh(message: PassMessage, now: Date): boolean {
  return message.listedAt !== undefined && now.getTime() - message.listedAt <= LISTED_MAX_AGE_SECONDS * 1000;
}
