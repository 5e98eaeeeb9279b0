import type { KubeObject } from "../../kube/index.ts";
import { fnv1a32 } from "../../kube/index.ts";
import type { PassMessage, Request } from "../core/index.ts";

export interface SweepInput {
  /** The controller whose primaries these are. */
  controller: string;
  /** One full (paginated) list of the controller's primary kind. */
  objects: readonly KubeObject[];
  now: Date;
  resyncSeconds: number;
  /** Messages per shard (one queue batch each). */
  shardSize: number;
  /**
   * How often the sweep runs, in seconds; default 60. Buckets are this long (never shorter than a
   * minute), so a sweep every 2 minutes still reaches every bucket.
   */
  periodSeconds?: number;
}

export interface SweepPlan {
  /** Number of buckets the interval is cut into: ceil(resyncSeconds / max(60, periodSeconds)). */
  buckets: number;
  /** The bucket due this minute. */
  bucket: number;
  /** Drift requests due this minute, in list order. */
  due: Request[];
  /** `due` as messages, chunked into shards of at most `shardSize` for fan-out. */
  shards: PassMessage[][];
}

/**
 * Which primaries are due for a drift pass this minute. An object is due in minute m iff
 * `hash(uid) mod B == m mod B` with B = ceil(resyncSeconds / 60), so over any B consecutive
 * minutes each listed object is due exactly once, and the load spreads evenly over the interval
 * without any stored schedule. The hash is FNV-1a (32 bit) of the UID, stable across runs.
 *
 * With a sweep period P above a minute, buckets are P long: B = ceil(resyncSeconds / P), and the
 * bucket due is floor(now / P) mod B, so every bucket is still reached.
 *
 * Caveats: the spread is statistical: a bucket holds n/B ± ~sqrt(n/B) objects. A sweep that runs
 * more often than once a minute (the Node host may) sends the minute's bucket at each of its
 * sweeps in that minute: more drift passes than needed, never fewer. An object
 * without a UID (never from a real list) is hashed by namespace/name. An object created
 * mid-interval waits up to one interval for its first drift pass (its creation event already
 * ran one).
 *
 * @example
 * const plan = planSweep({ controller: "proxy", objects: items, now: clock.now(), resyncSeconds: 600, shardSize: 100 });
 * for (const shard of plan.shards) await queue.send(shard);
 */
export function planSweep(input: SweepInput): SweepPlan {
  const slotSeconds = Math.max(60, input.periodSeconds ?? 60);
  const buckets = Math.max(1, Math.ceil(input.resyncSeconds / slotSeconds));
  const bucket = Math.floor(input.now.getTime() / (slotSeconds * 1000)) % buckets;
  const due: Request[] = [];
  const messages: PassMessage[] = [];
  for (const object of input.objects) {
    const meta = object.metadata;
    if (!meta?.name) continue;
    if (sweepBucket(meta.uid ?? `${meta.namespace ?? ""}/${meta.name}`, buckets) !== bucket) continue;
    const request: Request = meta.namespace
      ? { controller: input.controller, namespace: meta.namespace, name: meta.name }
      : { controller: input.controller, name: meta.name };
    due.push(request);
    const uid = meta.uid ? { uid: meta.uid } : {};
    messages.push({ request, attempt: 0, ...uid });
  }
  return { buckets, bucket, due, shards: chunk(messages, Math.max(1, Math.floor(input.shardSize))) };
}

/** The minute bucket (0 ≤ b < buckets) an object with this UID is swept in. */
export function sweepBucket(uid: string, buckets: number): number {
  return fnv1a32(uid) % buckets;
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
