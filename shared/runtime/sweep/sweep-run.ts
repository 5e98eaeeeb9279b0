import type { KubeObject } from "../../kube/index.ts";
import {
  type Context,
  createSweepMemo,
  isEmptyStatus,
  type PassMessage,
  type Request,
  type SweepMemo,
  type Trigger,
} from "../core/index.ts";
import {
  type ControllerDefinition,
  combineListed,
  DEFAULT_SAFETY_NET_SECONDS,
  driftDue,
  dueThisSlot,
  type Listed,
  listForDrift,
  listForPage,
  pagesOf,
  type Registry,
  SWEEP_PAGE_SIZE,
} from "../definition/index.ts";
import { finalizerDrift } from "../pass/index.ts";
import type { SweepRunInfo, SweepTask, SweepTaskRun } from "./sweep-task.ts";

export interface SweepOptions {
  /** Messages per queue batch when fanning drift requests out. */
  shardSize: number;
  /**
   * Attach what the drift lists showed of a primary's derived objects (`Message.listed`), saving
   * its pass their GETs. The primary itself is never attached: its pass reads it.
   */
  attachListed: boolean;
  /** Send every object a pass (trigger `start`): a host's first sweep after start. */
  full?: boolean;
  /** How often the platform runs the sweep, seconds (default 60). */
  periodSeconds?: number;
  /** Each object's safety-net pass comes once per this many seconds; default a day. */
  safetyNetSeconds?: number;
  /** Page size of every list; default 500. */
  pageSize?: number;
  /**
   * When the platform's schedule meant this sweep to run (Workers `controller.scheduledTime`, the
   * Scheduled Event's `time`): the sweep plans its period from it, not from when the invocation
   * happened to start, so a cron firing late or early neither doubles nor skips what falls at the
   * seam (see {@link sweepInstant}).
   */
  scheduledAt?: Date;
}

/**
 * The instant a sweep plans its period from: the schedule's time when given and within one period
 * of the clock, else the clock. Sweeps planned from their schedule's times tile the clock exactly
 * (each plans `[at, at + period)`), whatever the invocations' jitter.
 *
 * Caveats: a schedule's time more than a period away (a retried invocation long after) is not
 * trusted: that sweep plans from the clock, as one without a schedule does.
 */
export function sweepInstant(clock: Date, scheduledAt: Date | undefined, periodSeconds: number): Date {
  if (!scheduledAt || Number.isNaN(scheduledAt.getTime())) return clock;
  return Math.abs(clock.getTime() - scheduledAt.getTime()) < periodSeconds * 1000 ? scheduledAt : clock;
}

/** What the sweep did for one controller. */
export interface ControllerSweep {
  /** Primaries listed this sweep. */
  listed: number;
  /** Messages sent (drift, safety net, start). */
  due: number;
  shards: number;
  /** Whether the drift lists and decisions ran this sweep (once per drift period). */
  drift: boolean;
  /** Messages by trigger, `drift:<reason>` for drift. Empty at steady state. */
  reasons: Record<string, number>;
}

export interface SweepSummary {
  controllers: Record<string, ControllerSweep>;
  tasks: Record<string, Record<string, number> | { error: string }>;
  durationMs: number;
  /** The sweep did nothing: the API server was failing (the platform's circuit was open). */
  heldBack?: boolean;
}

/**
 * The cron function: an informer without the watch. For each controller it lists the primaries
 * page by page (from the watch cache); once per drift period (`resyncSeconds`) it also lists the
 * kinds the controller's {@link ControllerDefinition.drift} declares, and sends a pass only to the
 * primaries its pure decision names, carrying the reason. Every object also gets a safety-net
 * pass once per `safetyNetSeconds` (a day), spread by UID. Each page then goes to the
 * controller's periodic tasks, and is dropped before the next one is listed.
 *
 * At steady state with nothing changing it sends no messages, and its requests grow with the
 * number of kinds and pages, not with the number of objects. Memory is bounded by a page of
 * primaries, the owned objects of that page (`perPage` lists), the whole-period lists and what
 * each task declares it keeps — never by the fleet.
 *
 * Caveats: a task that throws is logged, counted and reported, gets no further pages, and never
 * stops the drift requests or the other tasks. A kind whose list fails (also mid-way, e.g. an
 * expired continue token) is skipped from there on this sweep; its tasks are not finished (their
 * counts would be partial) and its objects are looked at next period. A failed `load` skips that
 * controller's decisions this period (logged, counted).
 */
export async function runSweep(
  ctx: Context,
  registry: Registry,
  tasks: readonly SweepTask[],
  options: SweepOptions,
): Promise<SweepSummary> {
  const started = performance.now();
  const periodSeconds = options.periodSeconds ?? 60;
  const now = sweepInstant(ctx.clock.now(), options.scheduledAt, periodSeconds);
  const pageSize = options.pageSize ?? SWEEP_PAGE_SIZE;
  const summary: SweepSummary = { controllers: {}, tasks: {}, durationMs: 0 };
  const memo = createSweepMemo();

  for (const def of registry.controllers) {
    const driftNow = options.full === true || driftDue(now, def.resyncSeconds, periodSeconds);
    // A full sweep sends every object anyway: no lists or decisions to make.
    const decision =
      driftNow && def.drift && !options.full ? await decisionFor(ctx, def, now, memo, pageSize) : undefined;
    const stats: ControllerSweep = {
      listed: 0,
      due: 0,
      shards: 0,
      drift: decision !== undefined,
      reasons: {},
    };
    const runs = startTasks(
      ctx,
      tasks.filter((t) => driftNow || !t.withDrift),
      def.name,
      memo,
      summary,
      { at: now },
    );
    try {
      for await (const page of pagesOf(ctx.kube, def.for, { limit: pageSize })) {
        stats.listed += page.length;
        const decide = decision ? await decision.forPage(page) : undefined;
        const trigger = async (object: KubeObject): Promise<Trigger | undefined> => {
          if (options.full) return { kind: "start" };
          // A status kubefn did not seal (a stolen token wrote it): the pass rewrites it now, not
          // at the next drift period. The list is made anyway: no request, only an HMAC.
          const seal = ctx.seal ? await ctx.seal.verify(object) : "sealed";
          if (seal !== "sealed") return { kind: "drift", reason: `${seal}-status` };
          // A status blanked (kubefn never writes one empty) long after the object's creation
          // event brought its first pass: reported, and rewritten now.
          if (
            ctx.seal &&
            isEmptyStatus(object) &&
            (secondsSinceCreated(object, now) ?? 0) > 2 * periodSeconds
          ) {
            ctx.log.warn(
              "status is empty long after the object was created: blanked by someone; a pass rewrites it",
              {
                controller: def.name,
                namespace: object.metadata.namespace,
                name: object.metadata.name,
                resourceVersion: object.metadata.resourceVersion,
              },
            );
            ctx.metrics.count("kubefn_empty_status_total", { controller: def.name });
            return { kind: "drift", reason: "empty-status" };
          }
          // No seal, no intake: no creation event brings a new object its first pass, and its drift
          // period may be minutes away (a Site's is five). Sent by the sweeps of its first two
          // periods while its status is empty; one created long ago and never reconciled (a
          // namespace kubefn may not write to) keeps its drift period.
          if (
            !ctx.seal &&
            isEmptyStatus(object) &&
            (secondsSinceCreated(object, now) ?? Infinity) <= 2 * periodSeconds
          )
            return { kind: "drift", reason: "new" };
          if (dueThisSlot(object, now, options.safetyNetSeconds ?? DEFAULT_SAFETY_NET_SECONDS, periodSeconds))
            return { kind: "safety-net" };
          if (!def.drift)
            return dueThisSlot(object, now, def.resyncSeconds, periodSeconds)
              ? { kind: "drift", reason: "resync" }
              : undefined;
          const reason = finalizerDrift(def, object) ?? (await decide?.decide(object));
          return reason === undefined ? undefined : { kind: "drift", reason };
        };
        const messages: PassMessage[] = [];
        for (const object of page) {
          const why = await trigger(object);
          if (!why || !object.metadata.name) continue;
          const request: Request = object.metadata.namespace
            ? { controller: def.name, namespace: object.metadata.namespace, name: object.metadata.name }
            : { controller: def.name, name: object.metadata.name };
          const listed =
            options.attachListed && why.kind === "drift" && def.drift?.attach
              ? decide?.attach(object)
              : undefined;
          messages.push({
            request,
            attempt: 0,
            trigger: why,
            ...(object.metadata.uid ? { uid: object.metadata.uid } : {}),
            ...(listed && listed.length > 0 ? { listed, listedAt: now.getTime() } : {}),
          });
          const label = why.reason ? `${why.kind}:${why.reason}` : why.kind;
          stats.reasons[label] = (stats.reasons[label] ?? 0) + 1;
        }
        await send(ctx, def.name, messages, options.shardSize, stats);
        for (const run of runs) await run.page(page);
      }
    } catch (err) {
      ctx.log.error("sweep list failed", { controller: def.name, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "list" });
      continue;
    }
    for (const run of runs) await run.finish();
    summary.controllers[def.name] = stats;
    // Moves every sweep, also when nothing is due: the "sweep stalled" alert's clock.
    ctx.metrics.gauge("kubefn_sweep_last_success_timestamp_seconds", ctx.clock.now().getTime() / 1000, {
      controller: def.name,
    });
  }

  summary.durationMs = Math.round(performance.now() - started);
  return summary;
}

/** How long before `now` `object` was created, in seconds (undefined without a creation time). */
function secondsSinceCreated(object: KubeObject, now: Date): number | undefined {
  const created = Date.parse(object.metadata.creationTimestamp ?? "");
  return Number.isNaN(created) ? undefined : (now.getTime() - created) / 1000;
}

/** A task's run that catches its own failures: it reports them once and takes no more pages. */
interface GuardedRun {
  page(primaries: readonly KubeObject[]): Promise<void>;
  finish(): Promise<void>;
}

function startTasks(
  ctx: Context,
  tasks: readonly SweepTask[],
  controller: string,
  memo: SweepMemo,
  summary: SweepSummary,
  info: SweepRunInfo,
): GuardedRun[] {
  return tasks
    .filter((t) => t.controller === controller)
    .map((task) => {
      let run: SweepTaskRun | undefined;
      let failed = false;
      const fail = (err: unknown) => {
        failed = true;
        ctx.log.error("sweep task failed", { task: task.name, error: String(err) });
        ctx.metrics.count("kubefn_sweep_errors_total", { controller, stage: task.name });
        summary.tasks[task.name] = { error: String(err) };
      };
      try {
        run = task.start(ctx, memo, info);
      } catch (err) {
        fail(err);
      }
      return {
        async page(primaries) {
          if (failed || !run) return;
          try {
            await run.page(primaries);
          } catch (err) {
            fail(err);
          }
        },
        async finish() {
          if (failed || !run) return;
          try {
            summary.tasks[task.name] = await run.finish();
          } catch (err) {
            fail(err);
          }
        },
      };
    });
}

/** A page's decision and attachments. */
interface PageDecision {
  decide(object: KubeObject): Promise<string | undefined>;
  attach(object: KubeObject): KubeObject[];
}

/**
 * The controller's decision bound to this period's whole-period lists and `load`; `forPage` adds
 * each page's `perPage` lists. Undefined when `load` failed.
 */
async function decisionFor(
  ctx: Context,
  def: ControllerDefinition,
  now: Date,
  memo: SweepMemo,
  pageSize: number,
): Promise<{ forPage(page: readonly KubeObject[]): Promise<PageDecision> } | undefined> {
  const drift = def.drift!;
  const lists = drift.lists ?? [];
  const period: Listed = await listForDrift(ctx, def.name, lists, pageSize);
  let shared: unknown;
  try {
    shared = drift.load ? await drift.load(ctx, memo) : undefined;
  } catch (err) {
    ctx.log.error("sweep drift load failed", { controller: def.name, error: String(err) });
    ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "load" });
    return undefined;
  }
  const paged = lists.some((l) => l.perPage);
  return {
    async forPage(page) {
      const listed = paged
        ? combineListed(period, await listForPage(ctx, def.name, lists, page, pageSize))
        : period;
      return {
        async decide(primary) {
          try {
            return await drift.decide({ primary, listed, shared, now });
          } catch (err) {
            ctx.log.error("sweep drift decision failed", {
              controller: def.name,
              name: primary.metadata.name,
              error: String(err),
            });
            return "decide-error";
          }
        },
        attach(primary) {
          try {
            return drift.attach?.({ primary, listed, shared, now }) ?? [];
          } catch {
            return [];
          }
        },
      };
    },
  };
}

async function send(
  ctx: Context,
  controller: string,
  messages: PassMessage[],
  shardSize: number,
  stats: ControllerSweep,
): Promise<void> {
  const size = Math.max(1, Math.floor(shardSize));
  for (let i = 0; i < messages.length; i += size) {
    const shard = messages.slice(i, i + size);
    stats.shards++;
    try {
      await ctx.queue.send(shard);
      stats.due += shard.length;
      for (const m of shard) {
        ctx.metrics.count("kubefn_sweep_requests_total", {
          controller,
          trigger: m.trigger?.kind ?? "unknown",
        });
      }
    } catch (err) {
      // A lost message only delays that object to the next period; keep sweeping.
      ctx.log.error("sweep enqueue failed", { controller, messages: shard.length, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller, stage: "enqueue" });
    }
  }
}
