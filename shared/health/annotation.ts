/**
 * Where the sweep keeps probe bookkeeping between runs: a compact JSON annotation on the Proxy.
 * The sweep is its only writer (a merge patch guarded by resourceVersion); the reconciler only
 * reads it and projects the reported verdict into status, so `.status` keeps one writer.
 *
 * Caveats: the annotation write is made by the functions' own identity, so intake drops its
 * audit event; the sweep asks for the reconcile itself (`reconcileKeys` in `sweep.ts`).
 */

import * as z from "zod";
import type { Patch } from "../kube/port.ts";
import { type HealthState, makeState } from "./state.ts";

export const HEALTH_ANNOTATION = "crawl.kubefn.dev/health";

const refusalReason = z.enum(["MetadataAddress", "LinkLocal", "Unspecified", "InvalidHost", "InvalidURL"]);
const counter = z.number().int().min(0).max(1_000_000);

const stateSchema = z.object({
  instance: z.string().min(1),
  verdict: z.boolean().optional(),
  consecOK: counter,
  consecFail: counter,
  reported: z
    .object({
      healthy: z.boolean(),
      latencyMs: z.number().finite().min(0).optional(),
      at: z.iso.datetime({ offset: true }).optional(),
    })
    .optional(),
  refused: z.object({ reason: refusalReason, message: z.string() }).optional(),
});

/** Compact, canonical JSON: equal states give equal strings. */
export function encodeHealthState(state: HealthState): string {
  return JSON.stringify(makeState(state));
}

/** Tolerant decode: a missing, malformed or foreign value reads as "no state" (start fresh). */
export function decodeHealthState(text: string | undefined): HealthState | undefined {
  if (text === undefined || text === "") return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = stateSchema.safeParse(raw);
  return parsed.success ? makeState(parsed.data) : undefined;
}

/** Reads the state from an object's annotations. */
export function healthStateOf(annotations: Record<string, string> | undefined): HealthState | undefined {
  return decodeHealthState(annotations?.[HEALTH_ANNOTATION]);
}

/**
 * The merge patch that stores `after`, or null when the stored annotation already says the same
 * (steady state writes nothing). With `resourceVersion` the patch is a guarded write: a concurrent
 * change gets a Conflict, and the next sweep recomputes from what is stored.
 *
 * @example
 * const patch = healthAnnotationPatch(obj.metadata.annotations?.[HEALTH_ANNOTATION], next, obj.metadata.resourceVersion);
 * if (patch) await kube.patch(proxies, key, patch);
 */
export function healthAnnotationPatch(
  before: string | undefined,
  after: HealthState,
  resourceVersion?: string,
): Patch | null {
  const encoded = encodeHealthState(after);
  if (before === encoded) return null;
  const metadata: Record<string, unknown> = { annotations: { [HEALTH_ANNOTATION]: encoded } };
  if (resourceVersion !== undefined) metadata.resourceVersion = resourceVersion;
  return { type: "merge", body: { metadata } };
}
