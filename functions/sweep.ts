import type { KubeObject } from "../shared/kube/index.ts";
import { listAll } from "../shared/kube/index.ts";
import type { Context, SweepTask } from "../shared/runtime/index.ts";
import { planSweep, type Registry } from "../shared/runtime/index.ts";

export type { SweepTask };

export interface SweepOptions {
  /** Messages per queue batch when fanning drift requests out. */
  shardSize: number;
  /** Attach the listed object to each drift message, saving each pass a GET. */
  snapshots: boolean;
  /** Send every object, not only those due this minute (a host's first sweep after start). */
  full?: boolean;
  /** How often the platform runs the sweep, seconds (default 60). */
  periodSeconds?: number;
}

export interface SweepSummary {
  controllers: Record<string, { listed: number; due: number; shards: number }>;
  tasks: Record<string, Record<string, number> | { error: string }>;
  durationMs: number;
}

/**
 * The cron function: list each primary kind once (paginated), send drift requests for the
 * objects due this minute, then run the controllers' periodic tasks on the same lists.
 *
 * Caveats: a task that throws is logged, counted and reported; it never stops the drift
 * requests or the other tasks. A kind whose list fails is skipped this minute (its objects
 * fall due again next interval).
 */
export async function runSweep(
  ctx: Context,
  registry: Registry,
  tasks: readonly SweepTask[],
  options: SweepOptions,
): Promise<SweepSummary> {
  const started = performance.now();
  const summary: SweepSummary = { controllers: {}, tasks: {}, durationMs: 0 };
  const listed = new Map<string, KubeObject[]>();
  for (const def of registry.controllers) {
    let objects: KubeObject[];
    try {
      objects = await listAll(ctx.kube, def.for);
    } catch (err) {
      ctx.log.error("sweep list failed", { controller: def.name, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "list" });
      continue;
    }
    listed.set(def.name, objects);
    const plan = planSweep({
      controller: def.name,
      objects,
      now: ctx.clock.now(),
      resyncSeconds: options.full ? 60 : def.resyncSeconds,
      ...(options.periodSeconds ? { periodSeconds: options.periodSeconds } : {}),
      shardSize: options.shardSize,
      snapshots: options.snapshots,
    });
    let sent = 0;
    for (const shard of plan.shards) {
      try {
        await ctx.queue.send(shard);
        sent += shard.length;
      } catch (err) {
        // A lost drift request only delays that object to its next interval; keep sweeping.
        ctx.log.error("sweep enqueue failed", {
          controller: def.name,
          messages: shard.length,
          error: String(err),
        });
        ctx.metrics.count("kubefn_sweep_errors_total", { controller: def.name, stage: "enqueue" });
      }
    }
    summary.controllers[def.name] = {
      listed: objects.length,
      due: plan.due.length,
      shards: plan.shards.length,
    };
    ctx.metrics.count("kubefn_sweep_requests_total", { controller: def.name }, sent);
    // Moves every sweep, also when nothing is due: the "sweep stalled" alert's clock.
    ctx.metrics.gauge("kubefn_sweep_last_success_timestamp_seconds", ctx.clock.now().getTime() / 1000, {
      controller: def.name,
    });
  }
  for (const task of tasks) {
    const primaries = listed.get(task.controller);
    if (!primaries) continue;
    try {
      summary.tasks[task.name] = await task.run(ctx, primaries);
    } catch (err) {
      ctx.log.error("sweep task failed", { task: task.name, error: String(err) });
      ctx.metrics.count("kubefn_sweep_errors_total", { controller: task.controller, stage: task.name });
      summary.tasks[task.name] = { error: String(err) };
    }
  }
  summary.durationMs = Math.round(performance.now() - started);
  return summary;
}
