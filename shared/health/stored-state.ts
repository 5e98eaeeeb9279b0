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
import { isDateTime } from "../zod/index.ts";
import { type HealthState, makeState } from "./state.ts";
import type { RefusalReason } from "./target.ts";

/** Where earlier versions kept the state; tenant-writable, so never read. */
export const HEALTH_ANNOTATION = "crawl.kubefn.dev/health";
/** The status field holding the state. */
export const HEALTH_STATUS_FIELD = "health";

const refusalReasons: ReadonlySet<string> = new Set<RefusalReason>([
  "MetadataAddress",
  "LinkLocal",
  "Unspecified",
  "Loopback",
  "PrivateAddress",
  "InvalidHost",
  "InvalidURL",
]);

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isInt = (v: unknown, min: number, max: number): v is number =>
  Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
const isCounter = (v: unknown): v is number => isInt(v, 0, 1_000_000);

/**
 * The stored state's shape, checked field by field (what a zod schema of it would check, at a
 * small part of its cost: every probe decodes one). Unknown fields are dropped.
 */
function stateOf(raw: unknown): HealthState | undefined {
  if (!isRecord(raw)) return undefined;
  const { instance, verdict, consecOK, consecFail, reported, refused } = raw;
  if (typeof instance !== "string" || instance.length === 0) return undefined;
  if (verdict !== undefined && typeof verdict !== "boolean") return undefined;
  if (!isCounter(consecOK) || !isCounter(consecFail)) return undefined;
  if (reported !== undefined) {
    if (!isRecord(reported) || typeof reported.healthy !== "boolean") return undefined;
    const { latencyMs, at, samples } = reported;
    if (latencyMs !== undefined && !(typeof latencyMs === "number" && latencyMs >= 0)) return undefined;
    if (at !== undefined && !(typeof at === "string" && isDateTime(at))) return undefined;
    if (samples !== undefined && !isInt(samples, 1, 100)) return undefined;
  }
  if (refused !== undefined) {
    if (!isRecord(refused) || typeof refused.message !== "string") return undefined;
    if (typeof refused.reason !== "string" || !refusalReasons.has(refused.reason)) return undefined;
  }
  return makeState(raw as unknown as HealthState);
}

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
  return stateOf(raw);
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
