import type { Kube, KubeObject, Resource } from "../../kube/index.ts";
import { classifyError } from "../../kube/index.ts";
import { pagesOf } from "../../runtime/index.ts";
import { type ObjectState, stateOf, type Tone } from "./state.ts";

/** One object on the page: its key and state, and its probe latency when it has one. */
export interface FleetObject extends ObjectState {
  namespace?: string;
  name: string;
  latencyMillis?: number;
}

/**
 * One operator's primaries: counts by state, and a few objects: the latest to change among those
 * needing attention, then the latest to change among those that are well.
 */
export interface FleetKind {
  controller: string;
  kind: string;
  total: number;
  /** Most common first. */
  states: Array<{ state: string; tone: Tone; count: number }>;
  shown: FleetObject[];
  /** Why the list failed (the classified reason, never the message); the counts are then partial. */
  error?: string;
}

/** Probe latencies (`status.latencyMillis`) across the fleet, as a histogram. */
export interface LatencyHistogram {
  /** Upper bounds of the buckets, ms; a last bucket counts everything above the last bound. */
  bounds: readonly number[];
  counts: number[];
  probed: number;
  maxMillis?: number;
}

/** What one read of the fleet found, and what it cost. */
export interface FleetView {
  kinds: FleetKind[];
  latency: LatencyHistogram;
  /** List requests the read sent (one per page per kind). */
  lists: number;
  readAt: Date;
}

/** The primary kinds to read: each controller's `for`. */
export interface FleetSource {
  controller: string;
  resource: Resource;
}

export interface ReadFleetOptions {
  /** Objects per list page; default 500. */
  pageSize?: number;
  /** Objects needing attention listed by name per kind (default 20), and a quarter as many that are well. */
  shownPerKind?: number;
}

export const latencyBounds = [10, 25, 50, 100, 250, 500, 1000, 2500] as const;

/**
 * Reads every primary of each kind page by page (the first page from the API server's watch
 * cache, `resourceVersion=0`, so no etcd read) and folds each page into counts, a latency histogram
 * and a bounded sample: memory stays the same whatever the fleet's size. A kind whose list fails
 * is reported as failed; the others still show.
 *
 * Caveats: primaries carry no label kubefn sets, so each kind is listed whole — one request per
 * 500 objects per kind. Cache the result ({@link cachedFleet}); do not call it per view.
 */
export async function readFleet(
  kube: Kube,
  sources: readonly FleetSource[],
  clock: () => Date,
  options: ReadFleetOptions = {},
): Promise<FleetView> {
  const pageSize = options.pageSize ?? 500;
  const cap = options.shownPerKind ?? 20;
  const latency: LatencyHistogram = { bounds: latencyBounds, counts: latencyBounds.map(() => 0), probed: 0 };
  latency.counts.push(0);
  let lists = 0;
  const kinds = await Promise.all(
    sources.map(async ({ controller, resource }) => {
      const kind: FleetKind = { controller, kind: resource.kind, total: 0, states: [], shown: [] };
      // A Map: a state is a string from the cluster, and "__proto__" must stay a state.
      const states = new Map<string, { state: string; tone: Tone; count: number }>();
      const attention: FleetObject[] = [];
      const well: FleetObject[] = [];
      try {
        for await (const page of pagesOf(kube, resource, { limit: pageSize })) {
          lists++;
          for (const object of page) {
            const seen = fleetObjectOf(object);
            kind.total++;
            const bucket = states.get(seen.state) ?? { state: seen.state, tone: seen.tone, count: 0 };
            bucket.count++;
            states.set(seen.state, bucket);
            if (seen.latencyMillis !== undefined) countLatency(latency, seen.latencyMillis);
            if (seen.tone === "good") keepLatest(well, seen, Math.ceil(cap / 4));
            else keepLatest(attention, seen, cap);
          }
        }
      } catch (err) {
        kind.error = classifyError(err).reason;
      }
      kind.states = [...states.values()].sort((a, b) => b.count - a.count);
      kind.shown = [...attention, ...well];
      return kind;
    }),
  );
  return { kinds, latency, lists, readAt: clock() };
}

/**
 * One read shared by every view within `ttlMs`, and by views arriving while it runs: reloading
 * the page, or many viewers at once, cost one read per `ttlMs`.
 *
 * @example
 * const fleet = cachedFleet(() => readFleet(kube, sources, clock), 5_000, () => Date.now());
 * const { view, fresh } = await fleet();
 */
export function cachedFleet(
  read: () => Promise<FleetView>,
  ttlMs: number,
  now: () => number,
): () => Promise<{ view: FleetView; fresh: boolean }> {
  let last: { startedAt: number; view: Promise<FleetView> } | undefined;
  return async () => {
    const t = now();
    if (last && t - last.startedAt < ttlMs) return { view: await last.view, fresh: false };
    const current = { startedAt: t, view: read() };
    last = current;
    current.view.catch(() => {
      if (last === current) last = undefined;
    });
    return { view: await current.view, fresh: true };
  };
}

/** Inserts `o` into `list` (latest change first), keeping at most `cap`. */
function keepLatest(list: FleetObject[], o: FleetObject, cap: number): void {
  const at = list.findIndex((other) => (other.changedAt ?? "") < (o.changedAt ?? ""));
  list.splice(at === -1 ? list.length : at, 0, o);
  if (list.length > cap) list.pop();
}

function fleetObjectOf(object: KubeObject): FleetObject {
  const latencyMillis = (object as { status?: { latencyMillis?: unknown } }).status?.latencyMillis;
  const created = object.metadata.creationTimestamp;
  return {
    ...(created ? { changedAt: created } : {}),
    ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
    name: object.metadata.name ?? "",
    ...stateOf(object),
    ...(typeof latencyMillis === "number" && Number.isFinite(latencyMillis) && latencyMillis >= 0
      ? { latencyMillis }
      : {}),
  };
}

function countLatency(h: LatencyHistogram, ms: number): void {
  const i = h.bounds.findIndex((bound) => ms <= bound);
  const at = i === -1 ? h.bounds.length : i;
  h.counts[at] = (h.counts[at] ?? 0) + 1;
  h.probed++;
  h.maxMillis = Math.max(h.maxMillis ?? 0, ms);
}
