import { errorMessage } from "../../guards/index.ts";
import { type Context, type JobMessage, jobKey } from "../core/index.ts";
import type { Registry } from "../definition/index.ts";

/** What one job (a piece of the sweep's fanned-out work) did, for its log line. */
export interface JobResult {
  /** The job's own key (`jobKey`: `job:controller/task/slot`), never an object's. */
  key: string;
  controller: string;
  task: string;
  result: "done" | "error";
  /** What the handler counted (e.g. probes taken, health written). */
  counts: Record<string, number>;
  durationMs: number;
}

/**
 * Runs one job: the controller's `jobs[task]` handler over the objects the sweep listed. Jobs
 * are not passes: no primary is read, no status written, no follow-up sent.
 *
 * Never throws for a failed job: the failure is logged and counted (`kubefn_shard_errors_total`),
 * never retried: the next sweep plans the work again.
 *
 * @example
 * const result = await runJob(ctx, registry, message); // message.kind === "job"
 */
export async function runJob(ctx: Context, registry: Registry, message: JobMessage): Promise<JobResult> {
  const started = performance.now();
  const { controller, task, objects, data, due } = message.job;
  const result: JobResult = {
    key: jobKey(message.job),
    controller,
    task,
    result: "done",
    counts: {},
    durationMs: 0,
  };
  try {
    const handler = registry.controller(controller)?.jobs?.[task];
    if (!handler) throw new Error(`controller "${controller}" has no job handler "${task}"`);
    result.counts = await handler(ctx, objects, data, due === undefined ? {} : { due });
  } catch (err) {
    result.result = "error";
    ctx.log.error("shard failed; the next sweep plans it again", {
      key: result.key,
      task,
      error: errorMessage(err),
    });
    ctx.metrics.count("kubefn_shard_errors_total", { controller, task });
  }
  result.durationMs = Math.round((performance.now() - started) * 100) / 100;
  ctx.metrics.count("kubefn_jobs_total", { controller, task, result: result.result });
  return result;
}
