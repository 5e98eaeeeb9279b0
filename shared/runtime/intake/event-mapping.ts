import { mapWithConcurrency } from "../../concurrency/index.ts";
import { errorMessage, isRecord } from "../../guards/index.ts";
import {
  controllerOf,
  isNamespaceName,
  isObjectName,
  type KubeObject,
  type ObjectKey,
  type OwnerReference,
} from "../../kube/index.ts";
import { type Context, isEmptyStatus, type Request, requestKey, type StatusSeal } from "../core/index.ts";
import {
  type ControllerDefinition,
  createdReason,
  groupOf,
  ownedStatusReason,
  type Registry,
  type Watch,
  type WatchedChange,
} from "../definition/index.ts";
import { type EventBatch, parseEventBatch, relayEventSchema } from "./event-batch.ts";
import { isIntakeCanary } from "./intake-canary.ts";

/** Audit verbs that change an object. Reads (get, list, watch) never map. */
export const WRITE_VERBS: ReadonlySet<string> = new Set([
  "create",
  "update",
  "patch",
  "delete",
  "deletecollection",
]);
/**
 * Subresource writes that change what a controller manages: `scale` edits a workload's replicas.
 * Every other subresource is dropped: `status` is status-only, `finalize` is the namespace
 * controller's bookkeeping (the final delete follows as its own event), and `exec`, `eviction`,
 * `binding`, `token`, `attach`… are writes to something other than the object's desired state.
 */
export const MAPPED_SUBRESOURCES: ReadonlySet<string> = new Set(["scale"]);

/** Body kinds that are not the object itself (a delete's answer, a scale, options). */
const NOT_OBJECT_KINDS: ReadonlySet<string> = new Set(["Status", "DeleteOptions", "Scale"]);

export interface MapEventsOptions {
  /**
   * Usernames of the functions' own identity (e.g. "system:serviceaccount:kubefn-system:kubefn").
   * Their writes are dropped: the pass that wrote already scheduled its follow-up.
   */
  selfUsernames?: Iterable<string>;
  /** Watch mappers running at once. Default 8. */
  mapperConcurrency?: number;
  /**
   * kubefn's status seal: a primary's status write (by anyone, kubefn's own identity included)
   * whose stored status (the event's `responseObject`, audit level RequestResponse) does not
   * carry kubefn's seal maps to a pass for that primary. Without it every status write is dropped.
   */
  seal?: StatusSeal;
}

/** What a batch became. Every event lands in exactly one of skipped, dropped, ignored, unresolved or mapped. */
export type MappingCounts = {
  /** Events in the batch. */
  events: number;
  /** Malformed events, skipped. */
  skipped: number;
  /** Well-formed but filtered by rule: not ResponseComplete, a read, a failure, a subresource, a self-write. */
  dropped: number;
  /** Kinds no controller cares about, or events that mapped to nothing (e.g. a foreign owner). */
  ignored: number;
  /**
   * Owned kinds without a body (Metadata level) whose `ownerFromKey` names no owner (or is not
   * declared): left to the sweep.
   */
  unresolved: number;
  /** Events that produced at least one request or mapper call. */
  mapped: number;
  /** Mappers that threw; their requests are lost to this batch (the sweep covers them). */
  mapperErrors: number;
  /** Requests after deduplication. */
  requests: number;
};

export interface MappingResult {
  source: EventBatch["source"];
  /** Deduplicated by controller + namespace + name, in first-seen order. */
  requests: Request[];
  /**
   * The reason of each request (by `requestKey`) that only status writes of owned objects
   * brought ({@link ownedStatusReason}; see `ControllerDefinition.readinessFrom`), or only the
   * primary's creation ({@link createdReason}). A request any other change (or both) brought has
   * none: its pass is a whole one.
   */
  reasons: ReadonlyMap<string, string>;
  /**
   * The UID of each request (by `requestKey`) whose reason is {@link createdReason}: the created
   * object's, as the event's body names it (the sender's word: a precondition, never a fact).
   */
  uids: ReadonlyMap<string, string>;
  counts: MappingCounts;
  /**
   * Names of intake canaries (see intake-canary.ts) the batch created, in kubefn-system, once
   * each: intake acknowledges each with an Event. They map to no request (counted `mapped`).
   */
  canaries: string[];
}

/** One change to one object, whatever the sender. */
interface Change {
  group: string;
  resource: string;
  namespace: string | undefined;
  name: string;
  verb: WatchedChange["verb"];
  object: KubeObject | undefined;
  /** The audit event's requestObject, for predicates. */
  request?: unknown;
}

/**
 * Turns one intake batch (an audit `EventList` or a `RelayBatch`) into deduplicated reconcile
 * requests through the registry: a primary kind maps to its own request, an owned kind to the
 * registered primary named by its controlling ownerReference, a watched kind through the watch's
 * mapper. Audit events count only at stage ResponseComplete, with a 2xx code and a write verb,
 * not on a subresource (see {@link MAPPED_SUBRESOURCES}) and not by `selfUsernames` — except a
 * primary's status write whose stored status does not carry kubefn's seal (`options.seal`), which
 * maps to that primary whoever the writer claims to be, and a status write of an owned kind a
 * controller takes readiness from (`readinessFrom`), which maps to its owner with the reason
 * {@link ownedStatusReason}.
 *
 * Caveats: an owned object whose body the event does not carry (audit Metadata level, a delete
 * answered with a Status) maps through the owning controller's `ownerFromKey`, or to nothing
 * (counted `unresolved`): the sweep covers it. Mappers run after the batch is read, at most
 * `mapperConcurrency` at once, once per watch and object key even if the batch changed that
 * object several times; a mapper that throws is logged and counted, never fails the batch.
 *
 * @throws EventBatchError when the envelope is neither format (intake answers 400).
 * @example
 * const { requests, counts } = await mapEvents(ctx, registry, JSON.parse(body), { selfUsernames: [self] });
 * await queue.send(requests.map((request) => ({ request, attempt: 0 })));
 */
export async function mapEvents(
  ctx: Pick<Context, "kube" | "log" | "metrics">,
  registry: Registry,
  body: unknown,
  options: MapEventsOptions = {},
): Promise<MappingResult> {
  const batch = parseEventBatch(body);
  const mapper = new BatchMapper(registry, new Set(options.selfUsernames ?? []), options.seal !== undefined);
  if (batch.source === "audit") {
    for (const item of batch.items) mapper.addAudit(item);
  } else {
    for (const event of batch.events) mapper.addRelay(event);
  }
  if (options.seal) await mapper.checkSeals(options.seal);
  await mapper.runWatches(ctx, options.mapperConcurrency ?? 8);
  return {
    source: batch.source,
    requests: mapper.requests(),
    reasons: mapper.reasons,
    uids: mapper.createdUids(),
    counts: mapper.counts,
    canaries: [...mapper.canaries],
  };
}

interface WatchJob {
  controller: ControllerDefinition;
  watch: Watch;
  change: WatchedChange;
  /** The reason its requests carry ({@link ownedStatusReason} for `readinessWatches`). */
  reason?: string;
  /**
   * How the event was counted before its mapper ran (a readiness mapper's event counts as mapped
   * only once it named a primary).
   */
  counted?: "ignored" | "unresolved";
}

class BatchMapper {
  readonly counts: MappingCounts = {
    events: 0,
    skipped: 0,
    dropped: 0,
    ignored: 0,
    unresolved: 0,
    mapped: 0,
    mapperErrors: 0,
    requests: 0,
  };
  private readonly out = new Map<string, Request>();
  /** Requests only owned objects' status writes brought, by key: see `MappingResult.reasons`. */
  readonly reasons = new Map<string, string>();
  /** The UID a primary's create named, by key (kept only while the reason stays `created`). */
  private readonly uids = new Map<string, string>();
  readonly canaries = new Set<string>();
  private readonly jobs = new Map<string, WatchJob>();
  /** Primaries' status writes whose stored status must carry kubefn's seal, by request key. */
  private readonly statusWrites = new Map<string, { request: Request; object: KubeObject }>();

  constructor(
    private readonly registry: Registry,
    private readonly self: ReadonlySet<string>,
    private readonly sealing = false,
  ) {}

  addAudit(item: unknown): void {
    this.counts.events++;
    if (!isRecord(item)) return void this.counts.skipped++;
    const { stage, verb, objectRef: ref, responseStatus } = item;
    if (typeof stage !== "string" || typeof verb !== "string") return void this.counts.skipped++;
    if (stage !== "ResponseComplete" || !WRITE_VERBS.has(verb)) return void this.counts.dropped++;
    if (!isRecord(ref) || typeof ref.resource !== "string" || !isRecord(responseStatus)) {
      return void this.counts.skipped++;
    }
    const code = responseStatus.code;
    if (typeof code !== "number") return void this.counts.skipped++;
    if (code < 200 || code > 299) return void this.counts.dropped++;
    const subresource = ref.subresource;
    if (subresource === "status" && this.sealing && this.statusWrite(ref, item.responseObject)) return;
    const user = isRecord(item.user) ? item.user.username : undefined;
    const self = typeof user === "string" && this.self.has(user);
    if (subresource === "status" && !self && this.readinessWrite(ref, item)) return;
    if (typeof subresource === "string" && subresource !== "" && !MAPPED_SUBRESOURCES.has(subresource)) {
      return void this.counts.dropped++;
    }
    if (self) return void this.counts.dropped++;

    const group = typeof ref.apiGroup === "string" ? ref.apiGroup : "";
    const resource = ref.resource;
    if (verb === "create" && this.canary(group, resource, ref.namespace, ref.name)) return;
    if (!this.interested(group, resource)) return void this.counts.ignored++;

    const refNamespace =
      typeof ref.namespace === "string" && ref.namespace !== "" ? ref.namespace : undefined;
    const refName = typeof ref.name === "string" && ref.name !== "" ? ref.name : undefined;
    const hasBody = subresource === undefined || subresource === "";

    if (verb === "deletecollection") {
      const list = hasBody && isRecord(item.responseObject) ? item.responseObject.items : undefined;
      if (!Array.isArray(list)) return void this.counts.unresolved++;
      let any = false;
      for (const entry of list) {
        const object = objectBody(entry);
        if (!object) continue;
        const namespace = object.metadata.namespace ?? refNamespace;
        if (!isStorableKey(namespace, object.metadata.name)) continue;
        const result = this.add({
          group,
          resource,
          namespace,
          name: object.metadata.name,
          verb: "delete",
          object,
        });
        any = result === true || any;
      }
      return void (any ? this.counts.mapped++ : this.counts.ignored++);
    }

    const object = hasBody ? (objectBody(item.responseObject) ?? objectBody(item.requestObject)) : undefined;
    const name = refName ?? object?.metadata.name;
    if (name === undefined) return void this.counts.skipped++;
    const namespace = refNamespace ?? object?.metadata.namespace;
    if (!isStorableKey(namespace, name)) return void this.counts.skipped++;
    const request = hasBody && item.requestObject !== undefined ? { request: item.requestObject } : {};
    this.count(
      this.add({
        group,
        resource,
        namespace,
        name,
        verb: verb as WatchedChange["verb"],
        object,
        ...request,
      }),
    );
  }

  addRelay(event: unknown): void {
    this.counts.events++;
    const parsed = relayEventSchema.safeParse(event);
    if (!parsed.success) return void this.counts.skipped++;
    const { type, resource: res, object } = parsed.data;
    const { namespace: ns, name } = object.metadata;
    if (type === "ADDED" && this.canary(res.group, res.resource, ns, name)) return;
    if (!this.interested(res.group, res.resource)) return void this.counts.ignored++;
    const verb = type === "ADDED" ? "create" : type === "DELETED" ? "delete" : "update";
    const meta = object.metadata;
    const namespace = meta.namespace === "" ? undefined : meta.namespace;
    if (!isStorableKey(namespace, meta.name)) return void this.counts.skipped++;
    const kubeObject = { apiVersion: "", kind: "", ...object } as KubeObject;
    if (parsed.data.readinessOnly && type === "MODIFIED") {
      const ref = { apiGroup: res.group, resource: res.resource, namespace: meta.namespace, name: meta.name };
      if (this.readinessWrite(ref, { responseObject: kubeObject })) return;
    }
    this.count(
      this.add({
        group: res.group,
        resource: res.resource,
        namespace,
        name: meta.name,
        verb,
        object: kubeObject,
      }),
    );
  }

  /**
   * Holds a primary's status write for {@link checkSeals} (whoever wrote it: kubefn's identity is
   * no proof of kubefn); false when the event names no primary or carries no stored body.
   */
  private statusWrite(ref: Record<string, unknown>, response: unknown): boolean {
    const group = typeof ref.apiGroup === "string" ? ref.apiGroup : "";
    if (typeof ref.resource !== "string") return false;
    const primary = this.registry.primaryFor(group, ref.resource);
    const object = objectBody(response);
    if (!primary || !object) return false;
    const namespace = primary.for.namespaced
      ? typeof ref.namespace === "string" && ref.namespace !== ""
        ? ref.namespace
        : object.metadata.namespace
      : undefined;
    const name = typeof ref.name === "string" && ref.name !== "" ? ref.name : object.metadata.name;
    if (!isStorableKey(namespace, name)) return false;
    const request: Request = { controller: primary.name, name };
    if (namespace !== undefined) request.namespace = namespace;
    // The last write of the batch is what is stored now; an earlier one is superseded.
    const key = requestKey(request);
    if (this.statusWrites.has(key)) this.counts.dropped++;
    this.statusWrites.set(key, { request, object });
    return true;
  }

  /**
   * Maps a status write of an owned kind some controller takes readiness from (`readinessFrom`) to
   * its owner, with reason {@link ownedStatusReason}: through the controlling ownerReference of
   * the stored object when the event carries it, else the owner's `ownerFromKey` (audit Metadata
   * level names the object only). False when no controller takes readiness from the kind.
   *
   * Caveats: the body is the writer's word. It only chooses which owner's key is named, among the
   * owners that declared the kind; the pass reads the rest, and an owner that does not exist is
   * one read.
   */
  private readinessWrite(ref: Record<string, unknown>, item: Record<string, unknown>): boolean {
    const group = typeof ref.apiGroup === "string" ? ref.apiGroup : "";
    if (typeof ref.resource !== "string") return false;
    const resource = ref.resource;
    const owners = this.registry
      .ownersOf(group, resource)
      .filter((def) => def.readinessFrom?.some((r) => r.group === group && r.resource === resource));
    if (owners.length === 0) return false;
    const object = objectBody(item.responseObject) ?? objectBody(item.requestObject);
    const name = typeof ref.name === "string" && ref.name !== "" ? ref.name : object?.metadata.name;
    const namespace =
      typeof ref.namespace === "string" && ref.namespace !== "" ? ref.namespace : object?.metadata.namespace;
    if (name === undefined || !isStorableKey(namespace, name)) {
      this.counts.skipped++;
      return true;
    }
    const key: ObjectKey = namespace === undefined ? { name } : { namespace, name };
    let mapped = false;
    const owner = object ? controllerRef(object) : undefined;
    const def = owner ? this.registry.primaryForKind(groupOf(owner.apiVersion), owner.kind) : undefined;
    if (owner && def && owners.includes(def)) {
      mapped = this.emit(
        { controller: def.name, namespace: def.for.namespaced ? namespace : undefined, name: owner.name },
        ownedStatusReason,
      );
    } else {
      if (!object) {
        for (const def of owners) {
          const owned = def.owns!.find((o) => o.group === group && o.resource === resource)!;
          const ownerKey = def.ownerFromKey?.(owned, key);
          if (!ownerKey) continue;
          mapped =
            this.emit(
              {
                controller: def.name,
                namespace: def.for.namespaced ? ownerKey.namespace : undefined,
                name: ownerKey.name,
              },
              ownedStatusReason,
            ) || mapped;
        }
      }
      if (!mapped) {
        // No primary's controller reference: a workload several primaries report on, which a
        // readiness mapper may name them for (counted again if it does).
        const counted = object ? "ignored" : "unresolved";
        for (const def of owners) {
          const watch = def.readinessWatches?.find(
            (w) => w.resource.group === group && w.resource.resource === resource,
          );
          if (!watch) continue;
          const change: WatchedChange = { resource: watch.resource, key, verb: "update" };
          if (object) change.object = object;
          this.jobs.set(`readiness\0${def.name}\0${group}/${resource}\0${namespace ?? ""}\0${name}`, {
            controller: def,
            watch,
            change,
            reason: ownedStatusReason,
            counted,
          });
        }
        this.counts[counted]++;
        return true;
      }
    }
    if (mapped) this.counts.mapped++;
    else this.counts.ignored++;
    return true;
  }

  /**
   * Sends a pass to each primary whose status, as its write in this batch stored it, does not
   * carry kubefn's seal (counted mapped); kubefn's own status writes verify and are dropped.
   */
  async checkSeals(seal: StatusSeal): Promise<void> {
    for (const { request, object } of this.statusWrites.values()) {
      // A write that left the status empty is not kubefn's either (it never writes one empty).
      if (!isEmptyStatus(object) && (await seal.verify(object)) === "sealed") {
        this.counts.dropped++;
        continue;
      }
      this.counts.mapped++;
      this.emit({ ...request });
    }
  }

  /** Records an intake canary's create (counted mapped); false when the change is not one. */
  private canary(group: string, resource: string, namespace: unknown, name: unknown): boolean {
    if (typeof namespace !== "string" || typeof name !== "string") return false;
    if (!isIntakeCanary(group, resource, namespace, name)) return false;
    this.canaries.add(name);
    this.counts.mapped++;
    return true;
  }

  private count(result: boolean | "unresolved"): void {
    if (result === "unresolved") this.counts.unresolved++;
    else if (result) this.counts.mapped++;
    else this.counts.ignored++;
  }

  private interested(group: string, resource: string): boolean {
    const r = this.registry;
    return (
      r.primaryFor(group, resource) !== undefined ||
      r.ownersOf(group, resource).length > 0 ||
      r.watchersOf(group, resource).length > 0
    );
  }

  /** Maps one change; true when it produced a request or a mapper call. */
  private add(change: Change): boolean | "unresolved" {
    const { registry } = this;
    let produced = false;
    let unresolved = false;

    const observed = {
      verb: change.verb,
      ...(change.object ? { object: change.object } : {}),
      ...(change.request === undefined ? {} : { request: change.request }),
    };
    const key: ObjectKey =
      change.namespace === undefined
        ? { name: change.name }
        : { namespace: change.namespace, name: change.name };
    const ownedAs = (def: ControllerDefinition) =>
      def.owns!.find((o) => o.group === change.group && o.resource === change.resource)!;
    const primary = registry.primaryFor(change.group, change.resource);
    const passes = !primary?.predicate || primary.predicate(observed);
    if (primary) {
      const request: Request = {
        controller: primary.name,
        namespace: primary.for.namespaced ? change.namespace : undefined,
        name: change.name,
      };
      if (request.namespace === undefined) delete request.namespace;
      if (passes) {
        // A creation alone: the pass may add the finalizer before it reads (createdReason).
        const uid = change.verb === "create" ? change.object?.metadata.uid : undefined;
        if (typeof uid === "string" && uid !== "" && this.emit(request, createdReason))
          this.uids.set(requestKey(request), uid);
        else this.emit(request);
        produced = true;
      }
    }

    const owners = registry.ownersOf(change.group, change.resource).filter((def) => {
      return !def.ownedPredicate || def.ownedPredicate(ownedAs(def), observed);
    });
    if (owners.length > 0) {
      if (change.object) {
        const owner = controllerRef(change.object);
        const def = owner ? registry.primaryForKind(groupOf(owner.apiVersion), owner.kind) : undefined;
        if (owner && def && owners.includes(def)) {
          this.emit({
            controller: def.name,
            namespace: def.for.namespaced ? change.namespace : undefined,
            name: owner.name,
          });
          produced = true;
        }
      } else {
        for (const def of owners) {
          const ownerKey = def.ownerFromKey?.(ownedAs(def), key);
          if (ownerKey) {
            this.emit({
              controller: def.name,
              namespace: def.for.namespaced ? ownerKey.namespace : undefined,
              name: ownerKey.name,
            });
            produced = true;
          } else {
            unresolved = true;
          }
        }
      }
    }

    for (const { controller, watch } of registry.watchersOf(change.group, change.resource)) {
      const watched: WatchedChange = { resource: watch.resource, key, verb: change.verb };
      if (change.object) watched.object = change.object;
      if (change.request !== undefined) watched.request = change.request;
      this.jobs.set(
        `${controller.name}\0${change.group}/${change.resource}\0${change.namespace ?? ""}\0${change.name}`,
        {
          controller,
          watch,
          change: watched,
        },
      );
      produced = true;
    }

    return produced ? true : unresolved ? "unresolved" : false;
  }

  /**
   * Adds a request once per key; with `reason`, as {@link MappingResult.reasons} has it, unless
   * another change of the batch already asked for a whole pass of the key (or does later). True
   * when the request is one the API server could answer.
   */
  private emit(request: Request, reason?: string): boolean {
    if (request.namespace === undefined) delete request.namespace;
    // Owner names come from bodies, mapper results from code: neither becomes a request the API
    // server could never answer.
    if (!isStorableKey(request.namespace, request.name)) return false;
    const key = requestKey(request);
    if (!this.out.has(key)) {
      this.out.set(key, request);
      if (reason !== undefined) this.reasons.set(key, reason);
    } else if (this.reasons.get(key) !== reason) {
      // Two changes asking for different passes: a whole one.
      this.reasons.delete(key);
    }
    return true;
  }

  /** The UIDs of the requests whose reason stayed {@link createdReason}. */
  createdUids(): Map<string, string> {
    return new Map([...this.uids].filter(([key]) => this.reasons.get(key) === createdReason));
  }

  async runWatches(ctx: Pick<Context, "kube" | "log" | "metrics">, concurrency: number): Promise<void> {
    await mapWithConcurrency([...this.jobs.values()], concurrency, async (job) => {
      try {
        const requests = await job.watch.map(ctx, job.change);
        if (job.counted && requests.length > 0) {
          this.counts[job.counted]--;
          this.counts.mapped++;
          job.counted = undefined;
        }
        for (const request of requests) {
          if (this.registry.controller(request.controller)) this.emit({ ...request }, job.reason);
          else
            ctx.log.warn("mapper returned a request for an unknown controller", {
              controller: job.controller.name,
              request,
            });
        }
      } catch (err) {
        this.counts.mapperErrors++;
        ctx.metrics.count("kubefn_mapper_errors_total", {
          controller: job.controller.name,
          kind: job.watch.resource.kind,
        });
        ctx.log.error("watch mapper failed", {
          controller: job.controller.name,
          kind: job.watch.resource.kind,
          namespace: job.change.key.namespace,
          name: job.change.key.name,
          error: errorMessage(err),
        });
      }
    });
  }

  requests(): Request[] {
    const requests = [...this.out.values()];
    this.counts.requests = requests.length;
    return requests;
  }
}

/** Whether an event's key could name a stored object (forged or corrupted events may not). */
function isStorableKey(namespace: string | undefined, name: string): boolean {
  return isObjectName(name) && (namespace === undefined || isNamespaceName(namespace));
}

/** An object body with a name, or undefined for a Status, DeleteOptions, Scale or anything else. */
function objectBody(value: unknown): (KubeObject & { metadata: { name: string } }) | undefined {
  if (!isRecord(value) || !isRecord(value.metadata)) return undefined;
  if (typeof value.kind === "string" && NOT_OBJECT_KINDS.has(value.kind)) return undefined;
  if (typeof value.metadata.name !== "string" || value.metadata.name === "") return undefined;
  return value as KubeObject & { metadata: { name: string } };
}

/** The controlling ownerReference of an untrusted body, when it is well-formed. */
function controllerRef(object: KubeObject): OwnerReference | undefined {
  const refs = object.metadata.ownerReferences;
  const ref = Array.isArray(refs) ? controllerOf(object) : undefined;
  return ref &&
    typeof ref.kind === "string" &&
    typeof ref.apiVersion === "string" &&
    typeof ref.name === "string"
    ? ref
    : undefined;
}
