import type { KubeObject } from "../../../kube/index.ts";
import type { SweepTask } from "../../../runtime/index.ts";
import { proxyPhaseSchema } from "../api.ts";
import { proxyControllerName } from "../controller.ts";

/** The `phase` label of a Proxy whose status has no phase yet (the reconciler has not run). */
export const unknownPhaseLabel = "Unknown";

/**
 * Counts the listed Proxies by `status.phase`. Pure. Every known phase is present (zero when no
 * proxy has it), so a gauge falls back to 0 instead of keeping its last value.
 */
export function countByPhase(primaries: readonly KubeObject[]): Record<string, number> {
  const counts: Record<string, number> = { [unknownPhaseLabel]: 0 };
  for (const phase of proxyPhaseSchema.options) counts[phase] = 0;
  for (const p of primaries) {
    const phase = (p.status as { phase?: unknown } | undefined)?.phase;
    const key = typeof phase === "string" && phase in counts ? phase : unknownPhaseLabel;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/**
 * Sweep task setting the gauge `kubefn_proxies{phase}` from the Proxies the sweep listed, page by
 * page (it keeps only the counts). Makes no API calls.
 */
export function proxyPhaseGaugeTask(): SweepTask {
  return {
    name: "proxy-phase-gauge",
    controller: proxyControllerName,
    quiet: true,
    start(ctx) {
      const counts = countByPhase([]);
      return {
        async page(primaries) {
          for (const [phase, n] of Object.entries(countByPhase(primaries)))
            counts[phase] = (counts[phase] ?? 0) + n;
        },
        async finish() {
          for (const [phase, value] of Object.entries(counts))
            ctx.metrics.gauge("kubefn_proxies", value, { phase });
          return counts;
        },
      };
    },
  };
}
