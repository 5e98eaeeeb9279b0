import type { Kube, KubeObject } from "../../shared/kube/index.ts";
import { listPages } from "../../shared/kube/index.ts";
import type { Log, Metrics, RelayEvent } from "../../shared/runtime/index.ts";
import { predicateFor, type RelayKind } from "./kinds.ts";
import { type Edge, type Predicate, type Seen, seenOf, specChanges } from "./predicates.ts";
import { backoffDelay } from "./sender.ts";
import type { RawWatchEvent, WatchStream } from "./watch-stream.ts";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * The object as a relay event carries it: its identity and metadata only (name, namespace, uid,
 * generation, labels, ownerReferences, deletion), never its spec, data or status. Intake maps
 * events by key and ownerReference and every pass reads the cluster itself, so nothing else is
 * needed — and ConfigMap data or a Deployment's env must not travel to the function platform.
 * `managedFields` and kubectl's last-applied annotation (a copy of the whole object) are dropped.
 */
export function relayObject(object: KubeObject, _kind: RelayKind): RelayEvent["object"] {
  const { managedFields: _managed, ...metadata } = object.metadata;
  if (metadata.annotations?.[LAST_APPLIED] !== undefined) {
    const { [LAST_APPLIED]: _lastApplied, ...annotations } = metadata.annotations;
    metadata.annotations = annotations;
  }
  const meta = metadata as RelayEvent["object"]["metadata"];
  return { apiVersion: object.apiVersion, kind: object.kind, metadata: meta };
}

/** Whether a watch failure (an HTTP error or an ERROR event's Status) means "relist": 410 Gone. */
export function isGone(failure: unknown): boolean {
  if (typeof failure !== "object" || failure === null) return false;
  const f = failure as {
    statusCode?: unknown;
    code?: unknown;
    status?: unknown;
    reason?: unknown;
    message?: unknown;
  };
  if (f.statusCode === 410 || f.code === 410 || f.status === 410) return true;
  if (f.reason === "Expired" || f.reason === "Gone") return true;
  return typeof f.message === "string" && /too old resource version/i.test(f.message);
}

/** A watch stream that answered with an ERROR event. */
export class WatchErrorEvent extends Error {
  override readonly name = "WatchErrorEvent";
  constructor(readonly status: unknown) {
    const message = (status as { message?: unknown } | null)?.message;
    super(typeof message === "string" ? message : `watch ERROR event: ${JSON.stringify(status)}`);
  }
}

interface Known {
  seen: Seen;
  namespace: string | undefined;
  name: string;
}

export interface KindWatcherOptions {
  kind: RelayKind;
  /** Lists (paged); the relay never writes. */
  kube: Kube;
  stream: WatchStream;
  /** Receives every event that passed the kind's predicate. */
  emit: (event: RelayEvent) => void;
  log: Log;
  metrics: Metrics;
  /** Emit ADDED for every object of the first list. Default false: the sweep covers start-up. */
  emitInitial?: boolean;
  pageSize?: number;
  random?: () => number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  now?: () => number;
}

/**
 * List-watch of one kind, with edge predicates.
 *
 * Lists (paged), then watches from the list's resourceVersion with bookmarks, tracking the latest
 * resourceVersion from every event and bookmark. When a watch ends it re-watches from there; on
 * 410 Gone (an HTTP 410 or an ERROR event with code 410, "too old resource version") it relists
 * and emits the difference against what it last saw of each key: ADDED for new keys, the
 * predicate's verdict for changed ones, DELETED for keys that vanished. Other failures are retried
 * with backoff from the same resourceVersion.
 *
 * What is remembered per key is a {@link Seen} (UID, generation, deletion flag, payload hash),
 * never the object.
 *
 * Caveats: a relist's diff sees only the net change over the gap; an object created and deleted
 * inside it produces nothing, which is right for level-triggered controllers.
 */
export class KindWatcher {
  readonly #known = new Map<string, Known>();
  readonly #predicate: Predicate;
  readonly #payload: boolean;
  readonly #readiness: boolean;
  #resourceVersion: string | undefined;
  #listed = false;
  #failingSince: number | undefined;

  constructor(private readonly opts: KindWatcherOptions) {
    this.#predicate = predicateFor(opts.kind.predicate);
    this.#payload = opts.kind.predicate === "payload";
    this.#readiness = opts.kind.predicate === "readiness";
  }

  get resource(): string {
    const r = this.opts.kind.resource;
    return r.group === "" ? r.resource : `${r.resource}.${r.group}`;
  }

  /** The resourceVersion the next watch starts from; undefined until the first list. */
  get resourceVersion(): string | undefined {
    return this.#resourceVersion;
  }

  /** The first list completed. */
  get synced(): boolean {
    return this.#listed;
  }

  /** Since when (ms epoch) list or watch has failed without a success in between. */
  get failingSince(): number | undefined {
    return this.#failingSince;
  }

  /** Number of keys remembered. */
  get size(): number {
    return this.#known.size;
  }

  /**
   * Runs until `signal` aborts. `startFrom` resumes a watch at that resourceVersion without a
   * first list (keys are then unknown, so their first event counts as a create).
   */
  async run(signal: AbortSignal, startFrom?: string): Promise<void> {
    const sleep = this.opts.sleep ?? abortableSleep;
    const random = this.opts.random ?? Math.random;
    const now = this.opts.now ?? Date.now;
    if (startFrom !== undefined) {
      this.#resourceVersion = startFrom;
      this.#listed = true;
    }
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (this.#resourceVersion === undefined) await this.relist();
        await this.#watchOnce(signal);
        failures = 0;
        this.#failingSince = undefined;
      } catch (err) {
        if (signal.aborted) break;
        if (isGone(err)) {
          this.opts.metrics.count("kubefn_relay_relists_total", { resource: this.resource });
          this.opts.log.info("watch expired (410 Gone); relisting", { resource: this.resource });
          this.#resourceVersion = undefined;
          continue;
        }
        failures++;
        this.#failingSince ??= now();
        this.opts.metrics.count("kubefn_relay_watch_failures_total", { resource: this.resource });
        const delay = backoffDelay(failures, random(), { baseMs: 500, maxMs: 30_000 });
        this.opts.log.warn("list/watch failed; retrying", {
          resource: this.resource,
          error: err instanceof Error ? `${err.name}: ${err.message}` : String(err),
          delayMs: delay,
        });
        await sleep(delay, signal).catch(() => {});
      }
    }
  }

  /**
   * Lists every object and takes the list's resourceVersion. The first list only records what
   * exists (unless `emitInitial`); later ones emit the difference (see the class comment).
   */
  async relist(): Promise<void> {
    const seenNow = new Set<string>();
    let resourceVersion = "";
    const emitting = this.#listed || this.opts.emitInitial === true;
    for await (const page of listPages(this.opts.kube, this.opts.kind.resource, {
      limit: this.opts.pageSize,
    })) {
      resourceVersion = page.resourceVersion;
      for (const item of page.items) {
        const object = withKind(item, this.opts.kind);
        seenNow.add(keyFor(object));
        if (emitting) this.#observe("ADDED", object);
        else this.#remember(object);
      }
    }
    if (emitting) {
      for (const [key, known] of this.#known) {
        if (seenNow.has(key)) continue;
        const { namespace, name, seen } = known;
        const gone: KubeObject = {
          apiVersion: apiVersion(this.opts.kind),
          kind: this.opts.kind.resource.kind,
          metadata: { name, uid: seen.uid, ...(namespace ? { namespace } : {}) },
        };
        this.#observe("DELETED", gone);
      }
    }
    this.#resourceVersion = resourceVersion;
    this.#listed = true;
    this.opts.metrics.gauge("kubefn_relay_objects", this.#known.size, { resource: this.resource });
  }

  /** Applies one watch event: tracks the resourceVersion, judges the edge, emits. */
  handle(raw: RawWatchEvent): void {
    const object = raw.object as KubeObject | undefined;
    const rv = object?.metadata?.resourceVersion;
    if (raw.type === "ERROR") throw new WatchErrorEvent(raw.object);
    if (rv) this.#resourceVersion = rv;
    if (raw.type === "BOOKMARK")
      return void this.opts.metrics.count("kubefn_relay_bookmarks_total", { resource: this.resource });
    if (raw.type !== "ADDED" && raw.type !== "MODIFIED" && raw.type !== "DELETED") return;
    if (!object?.metadata?.name) return;
    this.#observe(raw.type, withKind(object, this.opts.kind));
  }

  async #watchOnce(signal: AbortSignal): Promise<void> {
    const rv = this.#resourceVersion;
    if (rv === undefined) return;
    const local = new AbortController();
    const onAbort = () => local.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    let failure: unknown;
    try {
      await this.opts.stream.watch(
        this.opts.kind.resource,
        rv,
        (event) => {
          if (failure !== undefined) return;
          try {
            this.handle(event);
            this.#failingSince = undefined;
          } catch (err) {
            failure = err instanceof WatchErrorEvent ? err.status : err;
            local.abort();
          }
        },
        local.signal,
      );
    } catch (err) {
      if (failure === undefined) failure = err;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
    if (failure !== undefined && !signal.aborted)
      throw failure instanceof Error || isGone(failure) ? failure : new WatchErrorEvent(failure);
    this.opts.metrics.count("kubefn_relay_watch_restarts_total", { resource: this.resource });
  }

  #remember(object: KubeObject): Seen {
    const seen = seenOf(object, this.#payload, this.#readiness);
    this.#known.set(keyFor(object), {
      seen,
      namespace: object.metadata.namespace,
      name: object.metadata.name ?? "",
    });
    return seen;
  }

  #observe(type: RelayEvent["type"], object: KubeObject): void {
    const key = keyFor(object);
    const old = this.#known.get(key);
    let edge: Edge;
    if (type === "DELETED") {
      this.#known.delete(key);
      edge = { type: "delete", seen: seenOf(object, this.#payload, this.#readiness) };
    } else {
      const seen = this.#remember(object);
      edge = old ? { type: "update", old: old.seen, seen } : { type: "create", seen };
    }
    const resource = this.resource;
    if (!this.#predicate(edge))
      return void this.opts.metrics.count("kubefn_relay_filtered_total", { resource });
    const eventType = edge.type === "create" ? "ADDED" : edge.type === "delete" ? "DELETED" : "MODIFIED";
    this.opts.metrics.count("kubefn_relay_events_total", { resource, type: eventType });
    const { group, version, resource: plural } = this.opts.kind.resource;
    this.opts.emit({
      type: eventType,
      resource: { group, version, resource: plural },
      object: relayObject(object, this.opts.kind),
      ...(this.#readiness && !specChanges(edge) ? { readinessOnly: true as const } : {}),
    });
  }
}

function keyFor(object: KubeObject): string {
  return `${object.metadata.namespace ?? ""}/${object.metadata.name ?? ""}`;
}

function apiVersion(kind: RelayKind): string {
  const r = kind.resource;
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

/** List items come without apiVersion/kind; fill them in. */
function withKind(object: KubeObject, kind: RelayKind): KubeObject {
  if (object.apiVersion && object.kind) return object;
  return { ...object, apiVersion: apiVersion(kind), kind: kind.resource.kind };
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
