/**
 * Where the sweep keeps probe bookkeeping between runs: compact JSON in `status.health` of the
 * Proxy. The sweep is that field's only writer (a merge patch of the status subresource, guarded
 * by resourceVersion); the reconciler only reads it and projects the reported verdict into the
 * rest of status, which it alone writes.
 *
 * Why status and not an annotation: whoever may edit a Proxy may write its annotations, and
 * probe history they could write would let them mark an unprobed proxy healthy and have crawlers
 * sent to it. The status subresource is writable only by kubefn (tenants get `proxies`, never
 * `proxies/status`) — the same trust crawlers already place in `status.phase`. The old
 * `crawl.kubefn.dev/health` annotation is ignored.
 *
 * Caveats: the status write is made by the functions' own identity, so intake drops its audit
 * event; the sweep asks for the reconcile itself (`reconcileKeys` in `sweep.ts`).
 */

import type { Patch } from "../kube/index.ts";
import * as z from "../zod/index.ts";
import { type HealthState, makeState } from "./state.ts";

/** Where earlier versions kept the state; tenant-writable, so never read. */
export const HEALTH_ANNOTATION = "crawl.kubefn.dev/health";
/** The status field holding the state. */
export const HEALTH_STATUS_FIELD = "health";

const refusalReason = z.enum([
  "MetadataAddress",
  "LinkLocal",
  "Unspecified",
  "Loopback",
  "PrivateAddress",
  "InvalidHost",
  "InvalidURL",
]);
const counter = z.number().check(z.int()).check(z.gte(0)).check(z.lte(1_000_000));

const stateSchema = z.object({
  instance: z.string().check(z.minLength(1)),
  verdict: z.optional(z.boolean()),
  consecOK: counter,
  consecFail: counter,
  reported: z.optional(
    z.object({
      healthy: z.boolean(),
      latencyMs: z.optional(z.number().check(z.gte(0))),
      at: z.optional(z.iso.datetime({ offset: true })),
      samples: z.optional(z.int().check(z.gte(1)).check(z.lte(100))),
    }),
  ),
  refused: z.optional(z.object({ reason: refusalReason, message: z.string() })),
});

/** Longest refusal message kept in the state (it may quote a tenant's probe URL). */
const maxRefusalMessageLength = 512;

/**
 * Compact, canonical JSON: equal states give equal strings. A refusal message is cut to 512
 * characters, so a tenant's 40 kB probe URL cannot push the state past what status accepts.
 */
export function encodeHealthState(state: HealthState): string {
  const bounded =
    state.refused && state.refused.message.length > maxRefusalMessageLength
      ? {
          ...state,
          refused: {
            ...state.refused,
            message: `${state.refused.message.slice(0, maxRefusalMessageLength - 1)}…`,
          },
        }
      : state;
  return JSON.stringify(makeState(bounded));
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

/** Reads the state from an object's status (`status.health`). */
export function healthStateOf(status: { health?: string | undefined } | undefined): HealthState | undefined {
  return decodeHealthState(status?.health);
}

/** The stored state of an object, as the sweep's subject carries it: `status.health`. */
export function storedHealthOf(object: object): string | undefined {
  const status = (object as { status?: { health?: unknown } }).status;
  return typeof status?.health === "string" ? status.health : undefined;
}

/**
 * The status merge patch that stores `after`, or null when the stored state already says the
 * same (steady state writes nothing). `alongside` adds status fields projected from the same
 * state (a latency report's latency and time), so they land in the one write. With
 * `resourceVersion` the patch is a guarded write: a
 * concurrent change gets a Conflict, and the next sweep recomputes from what is stored. Apply it
 * to the status subresource (`kube.patchStatus`).
 *
 * @example
 * const patch = healthStatusPatch(storedHealthOf(obj), next, obj.metadata.resourceVersion);
 * if (patch) await kube.patchStatus(proxies, key, patch);
 */
export function healthStatusPatch(
  before: string | undefined,
  after: HealthState,
  resourceVersion?: string,
  alongside?: Record<string, unknown>,
): Patch | null {
  const encoded = encodeHealthState(after);
  if (before === encoded) return null;
  const body: Record<string, unknown> = { status: { ...alongside, [HEALTH_STATUS_FIELD]: encoded } };
  if (resourceVersion !== undefined) body.metadata = { resourceVersion };
  return { type: "merge", body };
}
