/**
 * Kubernetes Events (events.k8s.io/v1) about a primary: what kubefn did and why, as `kubectl
 * describe` shows them. Written through the Kube port, so every platform records them the same
 * way and the API server counts them like any other write.
 */
import { isAlreadyExists, isConflict, isNotFound } from "./errors.ts";
import type { Kube, KubeObject } from "./port.ts";
import { Resources } from "./resources.ts";
import { fnv1a32 } from "./spec-hash.ts";

export type EventType = "Normal" | "Warning";

/** One thing that happened to a primary. */
export interface EventInput {
  type: EventType;
  /** CamelCase, why it happened (a condition reason, e.g. `ProbeFailed`). ≤ 128 characters. */
  reason: string;
  /** CamelCase, what was done (e.g. `CreateInstance`, `Reconcile`). ≤ 128 characters. */
  action: string;
  /** Human-readable; cut to 1024 characters, the API server's limit. */
  note: string;
}

/** Records events about objects; never throws (an event is worth less than the pass). */
export interface EventRecorder {
  record(regarding: KubeObject, event: EventInput): Promise<void>;
}

export interface EventRecorderOptions {
  /** `reportingController`, a qualified name, e.g. `kubefn.dev/proxy`. */
  controller: string;
  /** `reportingInstance`; stable across function instances so that series aggregate. */
  instance?: string;
  now: () => Date;
  /** Told about events that could not be written. */
  onError?: (err: unknown, event: EventInput) => void;
}

const noteLimit = 1024;
const fieldLimit = 128;

/** metav1.MicroTime: RFC 3339 with six fractional digits. */
export function formatMicroTime(at: Date): string {
  return `${at.toISOString().slice(0, 23)}000Z`;
}

/**
 * The Event's name: the regarding object's name and a 64-bit hash of everything that makes two
 * events "the same" (the fields the API server keeps immutable: type, reason, action, note,
 * reporting controller and instance, and the regarding object's UID). Equal events thus share one
 * name, which is what lets stateless functions aggregate a series without client-go's in-memory
 * cache (pure).
 */
export function eventName(
  regarding: KubeObject,
  event: EventInput,
  controller: string,
  instance: string,
): string {
  const key = [
    regarding.apiVersion,
    regarding.kind,
    regarding.metadata.namespace ?? "",
    regarding.metadata.name ?? "",
    regarding.metadata.uid ?? "",
    event.type,
    event.reason,
    event.action,
    clip(event.note, noteLimit),
    controller,
    instance,
  ].join("\u0000");
  const hash = [fnv1a32(key), fnv1a32(`${key}\u0001`)].map((h) => h.toString(16).padStart(8, "0")).join("");
  return `${(regarding.metadata.name ?? "object").slice(0, 253 - 17)}.${hash}`;
}

/**
 * A recorder that aggregates repeats into a series, like client-go's `events` recorder: the first
 * occurrence creates the Event; each repeat (same name, see {@link eventName}) patches
 * `series.count` (2, 3, ...) and `series.lastObservedTime`, guarded by the resourceVersion read.
 * Cluster-scoped objects get their Events in namespace `default`, as client-go does.
 *
 * Caveats: the caller decides *when* to record — only on a change (a condition flip, an instance
 * created/replaced/deleted), never in steady state. Failures go to `onError` and are otherwise
 * swallowed: an Event is an optimisation for humans, never a reason to fail or retry a pass.
 *
 * @example
 * const events = createEventRecorder(ctx.kube, { controller: "kubefn.dev/proxy", now: () => ctx.clock.now() });
 * await events.record(proxy, { type: "Normal", reason: "InstanceCreated", action: "CreateInstance", note: "created Pod px-1" });
 */
export function createEventRecorder(kube: Kube, opts: EventRecorderOptions): EventRecorder {
  const instance = opts.instance ?? "kubefn";
  return {
    async record(regarding, input) {
      const event = { ...input, note: clip(input.note, noteLimit) };
      try {
        await recordOnce(kube, regarding, event, opts.controller, instance, opts.now());
      } catch (err) {
        opts.onError?.(err, event);
      }
    },
  };
}

async function recordOnce(
  kube: Kube,
  regarding: KubeObject,
  event: EventInput,
  controller: string,
  instance: string,
  now: Date,
): Promise<void> {
  const namespace = regarding.metadata.namespace || "default";
  const name = eventName(regarding, event, controller, instance);
  const time = formatMicroTime(now);
  try {
    await kube.create(Resources.Event, {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name, namespace },
      eventTime: time,
      type: event.type,
      reason: clip(event.reason, fieldLimit),
      action: clip(event.action, fieldLimit),
      note: event.note,
      reportingController: controller,
      reportingInstance: instance,
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        ...(regarding.metadata.namespace ? { namespace: regarding.metadata.namespace } : {}),
        name: regarding.metadata.name,
        uid: regarding.metadata.uid,
        resourceVersion: regarding.metadata.resourceVersion,
      },
    } as KubeObject);
    return;
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
  // A repeat: count it into the series.
  for (let attempt = 0; attempt < 3; attempt++) {
    let existing: KubeObject & { series?: { count?: number } };
    try {
      existing = await kube.get(Resources.Event, { namespace, name });
    } catch (err) {
      if (isNotFound(err)) return; // expired (event TTL) between create and get: dropped, as client-go would
      throw err;
    }
    const count = Math.max(existing.series?.count ?? 1, 1) + 1;
    try {
      await kube.patch(
        Resources.Event,
        { namespace, name },
        {
          type: "merge",
          body: {
            metadata: { resourceVersion: existing.metadata.resourceVersion },
            series: { count, lastObservedTime: time },
          },
        },
      );
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
}

/** Cuts to `limit` UTF-8 bytes (the API server counts bytes), marking the cut with "...". */
function clip(text: string, limit: number): string {
  const bytes = (s: string) => new TextEncoder().encode(s).length;
  if (bytes(text) <= limit) return text;
  let cut = text.slice(0, limit - 3);
  while (bytes(cut) > limit - 3) cut = cut.slice(0, -1);
  return `${cut}...`;
}
