import { runSweep, type SweepSummary } from "../runtime/index.ts";
import type { Core } from "./build.ts";
import type { Kubefn } from "./ports.ts";

export {
  type ControllerSweep,
  runSweep,
  type SweepOptions,
  type SweepSummary,
  type SweepTask,
} from "../runtime/index.ts";

/**
 * The core's `sweep`: held back while the admission gate is shut or the API server is failing;
 * the first sweep after a held-back one sends every object, as a host's first.
 */
export function createSweep(core: Core): Kubefn["sweep"] {
  const { ctx, ports, admission, settings, ops } = core;
  // Sweeps held back by the gate missed what changed meanwhile without an event reaching a pass
  // (objects created then): the first sweep after it opens sends every object, as a host's first.
  let sweepsMissed = false;
  const quiet = new Set(ops.sweepTasks.filter((t) => t.quiet).map((t) => t.name));
  return async (options = {}) => {
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
    const sweep = core.hop(core.invocation(), undefined, "sweep");
    try {
      const summary = await runSweep(sweep.ctx, ops.registry, ops.sweepTasks, {
        shardSize: 100,
        attachListed: core.bodiesTravel,
        periodSeconds: settings.sweepPeriodSeconds,
        ...(options.full ? { full: true } : {}),
        ...(options.scheduledTime ? { scheduledAt: options.scheduledTime } : {}),
      });
      sweep.ctx.log.info("sweep", sweepLine(summary, quiet));
      sweep.end({ result: "done" });
      return summary;
    } catch (err) {
      sweep.end({ result: "error" });
      throw err;
    }
  };
}

/**
 * One short line per sweep: objects listed and due per controller, and the tasks' non-zero counts
 * (but those of `quiet` tasks, see `SweepTask.quiet`).
 */
export function sweepLine(
  summary: SweepSummary,
  quiet: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
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
    if (nonZero.length > 0 && !quiet.has(task)) fields[task] = Object.fromEntries(nonZero);
  }
  fields.ms = summary.durationMs;
  return fields;
}
