import type { KubeObject } from "../kube/index.ts";
import type { ControllerDefinition } from "./controller.ts";
import {
  DEFAULT_SAFETY_NET_SECONDS,
  driftDue,
  type Listed,
  listForDrift,
  pagesOf,
  SWEEP_PAGE_SIZE,
  safetyNetDue,
  sweepSlot,
} from "./drift.ts";
import type { Registry } from "./registry.ts";
import { sweepBucket } from "./sweep.ts";
import { createSweepMemo, type SweepMemo, type SweepTask } from "./sweep-task.ts";
import type { Context, Message, Request, Trigger } from "./types.ts";

export interface SweepOptions {
  /** Messages per queue batch when fanning drift requests out. */
  shardSize: number;
  /** Attach the listed object to each message, saving each pass a GET. */
  snapshots: boolean;
  /** Send every object a pass (trigger `start`): a host's first sweep after start. */
  full?: boolean;
  /** How often the platform runs the sweep, seconds (default 60). */
  periodSeconds?: number;
  /** Each object's safety-net pass comes once per this many seconds; default a day. */
  safetyNetSeconds?: number;
  /** Page size of every list; default 500. */
  pageSize?: number;
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
 * pass once per `safetyNetSeconds` (a day), spread by UID. Then the controllers' periodic tasks
 * run on the listed primaries.
 *
 * At steady state with nothing changing it sends no messages, and its requests grow with the
 * number of kinds and pages, not with the number of objects.
 *
 * Caveats: a task that throws is logged, counted and reported; it never stops the drift requests
 * or the other tasks. A kind whose list fails is skipped this sweep (its objects are looked at
 * next period). A failed `load` skips that controller's decisions this period (logged, counted).
 * Primaries are held whole only for a controller that has periodic tasks (they take the list).
 */
export async function runSweep(
  ctx: Context,
  registry: Registry,
  tasks: readonly SweepTask[],
  options: SweepOptions,
): Promise<SweepSummary> {
  const started = performance.now();
  const now = ctx.clock.now();
  const periodSeconds = options.periodSeconds ?? 60;
  const pageSize = options.pageSize ?? SWEEP_PAGE_SIZE;
  const summary: SweepSummary = { controllers: {}, tasks: {}, durationMs: 0 };
  const kept = new Map<string, KubeObject[]>();
  const memo = createSweepMemo();

  for (const def of registry.controllers) {
    const wantsList = tasks.some((t) => t.controller === def.name);
    const driftNow = options.full === true || driftDue(now, def.resyncSeconds, periodSeconds);
    // A full sweep sends every object anyway: no lists or decisions to make.
    const decide =
      driftNow && def.drift && !options.full ? await decisionFor(ctx, def, now, memo) : undefined;
    const attach = driftNow && def.drift?.attach && decide ? decide.attach : undefined;
    const trigger = async (object: KubeObject): Promise<Trigger | undefined> => {
      if (options.full) return { kind: "start" };
      if (safetyNetDue(object, now, options.safetyNetSeconds ?? DEFAULT_SAFETY_NET_SECONDS, periodSeconds))
        return { kind: "safety-net" };
      if (!def.drift)
        return resyncDue(object, def, now, periodSeconds) ? { kind: "drift", reason: "resync" } : undefined;
      const reason = await decide?.(object);
      return reason === undefined ? undefined : { kind: "drift", reason };
    };

    const stats: ControllerSweep = { listed: 0, due: 0, shards: 0, drift: decide !== undefined, reasons: {} };
    const primaries: KubeObject[] = [];
    try {
      for await (const page of pagesOf(ctx.kube, def.for, { limit: pageSize })) {
        stats.listed += page.length;
        if (wantsList) primaries.push(...page);
        const messages: Message[] = [];
        for (const object of page) {
          const why = await trigger(object);
          if (!why || !object.metadata.name) continue;
          const request: Request = object.metadata.namespace
            ? { controller: def.name, namespace: object.metadata.namespace, name: object.metadata.name }
            : { controller: def.name, name: object.metadata.name };
          const listed = options.snapshots && why.kind === "drift" ? attach?.(object) : undefined;
          messages.push({
            request,
            attempt: 0,
            trigger: why,
            ...(object.metadata.uid ? { uid: object.metadata.uid } : {}),
            ...(options.snapshots ? { snapshot: object, listedAt: now.getTime() } : {}),
            ...(listed && listed.length > 0 ? { listed } : {}),
          });
          const label = why.reason ? `${why.kind}:${why.reason}` : why.kind;
          stats.reasons[label] = (stats.reasons[label] ?? 0) + 1;
        }
        await send(ctx, def.name, messages, options.shardSize, stats);
      }
    } catch (err) {
      ctx.log.error("sweep list failed", { controller: def.name, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "list" });
      continue;
    }
    if (wantsList) kept.set(def.name, primaries);
    summary.controllers[def.name] = stats;
    // Moves every sweep, also when nothing is due: the "sweep stalled" alert's clock.
    ctx.metrics.gauge("kubefn_sweep_last_success_timestamp_seconds", ctx.clock.now().getTime() / 1000, {
      controller: def.name,
    });
  }

  for (const task of tasks) {
    const primaries = kept.get(task.controller);
    if (!primaries) continue;
    try {
      summary.tasks[task.name] = await task.run(ctx, primaries, memo);
    } catch (err) {
      ctx.log.error("sweep task failed", { task: task.name, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller: task.controller, stage: task.name });
      summary.tasks[task.name] = { error: String(err) };
    }
  }
  summary.durationMs = Math.round(performance.now() - started);
  return summary;
}

/** The controller's decision bound to this period's lists, or undefined when `load` failed. */
async function decisionFor(
  ctx: Context,
  def: ControllerDefinition,
  now: Date,
  memo: SweepMemo,
): Promise<
  | (((object: KubeObject) => Promise<string | undefined>) & { attach: (object: KubeObject) => KubeObject[] })
  | undefined
> {
  const drift = def.drift!;
  const listed: Listed = await listForDrift(ctx, def.name, drift.lists ?? []);
  let shared: unknown;
  try {
    shared = drift.load ? await drift.load(ctx, memo) : undefined;
  } catch (err) {
    ctx.log.error("sweep drift load failed", { controller: def.name, error: String(err) });
    ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "load" });
    return undefined;
  }
  const decide = async (primary: KubeObject) => {
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
  };
  const attach = (primary: KubeObject): KubeObject[] => {
    try {
      return drift.attach?.({ primary, listed, shared, now }) ?? [];
    } catch {
      return [];
    }
  };
  return Object.assign(decide, { attach });
}

/** A controller without a drift declaration: every object once per resync, spread by UID. */
function resyncDue(object: KubeObject, def: ControllerDefinition, now: Date, periodSeconds: number): boolean {
  const { slot, slotSeconds } = sweepSlot(now, periodSeconds);
  const buckets = Math.max(1, Math.ceil(def.resyncSeconds / slotSeconds));
  const meta = object.metadata;
  return sweepBucket(meta.uid ?? `${meta.namespace ?? ""}/${meta.name ?? ""}`, buckets) === slot % buckets;
}

async function send(
  ctx: Context,
  controller: string,
  messages: Message[],
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
