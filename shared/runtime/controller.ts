import type { KubeObject, ObjectKey, Resource } from "../kube/index.ts";
import type { DriftDeclaration } from "./drift.ts";
import type { Outcome } from "./outcome.ts";
import type { Context, Request } from "./types.ts";

/**
 * What a watch mapper sees of a changed object. Audit events at Metadata level carry no body, so
 * `object` may be absent: a mapper must work from the key alone when it is.
 */
export interface WatchedChange {
  resource: Resource;
  key: ObjectKey;
  verb: "create" | "update" | "patch" | "delete";
  /** The object after the write, when the event carries it. */
  object?: KubeObject;
  /**
   * What the writer sent, when the event carries it (audit `requestObject` at Request level or
   * above): an update's whole body, or a patch. For predicates; never trust it as state.
   */
  request?: unknown;
}

/** A kind nobody owns whose changes matter to a controller (e.g. Secret → Proxies naming it). */
export interface Watch {
  resource: Resource;
  /**
   * Which reconcile requests this change causes. May read the cluster through `ctx.kube`.
   *
   * Caveats: a mapper that throws is logged and counted, and the batch goes on without its
   * requests; the sweep covers what it missed. Requests naming an unregistered controller are
   * dropped. Return `[]` to filter a change out (mappers double as predicates).
   */
  map(ctx: Pick<Context, "kube" | "log">, change: WatchedChange): Promise<Request[]> | Request[];
}

/** Context of one pass: the world, plus the message's attempt count. */
export interface PassContext extends Context {
  request: Request;
  attempt: number;
}

/**
 * One operator, as kubefn runs it.
 *
 * `reconcile` must be idempotent: two passes for one key may run at once on serverless
 * platforms. It receives a private copy of the object and may change `status` in place; the
 * executor writes the status once, only if it changed, guarded by the resourceVersion read, and
 * sets `status.observedGeneration` to `metadata.generation` (see `observedGeneration`).
 * Metadata and spec writes (finalizers, annotations) the controller makes itself through
 * `ctx.kube`.
 *
 * Errors: return `failed(err)` (or throw); the executor classifies with shared/kube's
 * `classifyError` and retries per class (transient: backoff; conflict: now; quota: 60 s;
 * permanent: never). Quota and permanent conditions with domain reasons are the controller's to
 * set before it returns `failed`; the executor only sets `permanentErrorCondition` when asked.
 *
 * Caveats: `reconcileAbsent` runs when the primary object does not exist (deleted, or a
 * synthetic key such as the Site singleton request `__singletons`); without it an absent object
 * is `done`. When the controller writes the primary itself (e.g. adds a finalizer with
 * `kube.update`), it should copy the returned `metadata.resourceVersion` onto its object, or the
 * executor's guarded status write meets a Conflict and requeues at once (harmless, one more pass).
 */
export interface ControllerDefinition<T extends KubeObject = KubeObject> {
  name: string;
  for: Resource;
  /** Kinds whose controller ownerReference points at a `for` object. */
  owns?: Resource[];
  watches?: Watch[];
  /** Condition types this controller publishes; must be unique across the registry. */
  conditionTypes: string[];
  /**
   * Drift interval: the sweep revisits every object at least this often. A follow-up later than
   * this is not sent. At least 60 (the sweep runs every minute).
   */
  resyncSeconds: number;
  /**
   * Handlers of the sweep's fanned-out work, by task name (e.g. `probe`): a message carrying
   * `shard: { task, objects }` runs `shards[task](ctx, objects)` instead of a pass, and returns
   * counts for the log line.
   *
   * Caveats: a shard that fails is logged and counted, never retried: the next sweep plans the
   * work again.
   */
  shards?: Record<string, (ctx: Context, objects: readonly KubeObject[]) => Promise<Record<string, number>>>;
  /**
   * How the sweep finds drift from lists (see {@link DriftDeclaration}): once per `resyncSeconds`
   * it lists the declared kinds and sends a pass only to primaries the decision names, with the
   * reason. Without it, the sweep sends every primary a pass once per `resyncSeconds` (reason
   * `resync`), spread by UID.
   */
  drift?: DriftDeclaration;
  /**
   * The requeue delays `reconcile` asks for, by name (its timings, e.g. `provisioningPoll`).
   * Registration refuses one at or beyond `resyncSeconds`: such a follow-up is never sent, so a
   * controller that means "look again at the next drift pass" returns `awaitSweep()`.
   *
   * Caveats: only declared delays are checked at registration; one computed at run time (a
   * Retry-After) that late is not sent either, and the pass reports `awaitSweep`.
   */
  requeueSeconds?: Readonly<Record<string, number>>;
  /**
   * The permanent-error latch, when the executor should keep it. On a permanent error the
   * executor sets this condition True (reason from the classifier, observedGeneration = the
   * object's generation); a later pass that finds it True at the current generation does nothing
   * and calls no controller code. When a pass at a newer generation ends without a permanent
   * error, the executor sets it False with reason `Resolved`. Must be one of `conditionTypes`.
   *
   * Caveats: leave it unset when the controller keeps its own latch (the proxy does: its
   * `PermanentError` condition at the current generation), so the object has exactly one latch.
   * Deleting objects (deletionTimestamp set) are never latched, so finalizers still run.
   */
  permanentErrorCondition?: string;
  /**
   * Whether the executor maintains `status.observedGeneration`. Default true. Turn it off for a
   * status schema without that field: the API server would prune it and every pass would write.
   */
  observedGeneration?: boolean;
  /**
   * The primary that owns an object of an owned kind, from the object's key alone. Intake uses it
   * when an event carries no body (audit `Metadata` level, e.g. Secrets) and so no
   * ownerReferences; e.g. SubPool maps namespace `subpool-<name>` back to `<name>`. Without it
   * such an event maps to nothing and the sweep covers the change.
   */
  ownerFromKey?(resource: Resource, key: ObjectKey): ObjectKey | undefined;
  /**
   * Which changes of the primary kind (`for`) cause a pass, judged by intake from the event alone
   * (see shared/runtime/predicates.ts, e.g. `generationChanged`). Default: every change. Owned
   * and watched kinds are not filtered by it.
   *
   * Caveats: a dropped change is not lost work only because the sweep revisits every object;
   * keep predicates to changes the pass provably ignores.
   */
  predicate?(change: Pick<WatchedChange, "verb" | "object" | "request">): boolean;
  /**
   * Which changes of an owned kind map back to the owner (e.g. the seed's
   * `OwnedWorkloadPredicate`: workloads only on a generation change, so status churn of a
   * Deployment does not re-run its Site). Default: every change.
   */
  ownedPredicate?(resource: Resource, change: Pick<WatchedChange, "verb" | "object" | "request">): boolean;
  reconcile(ctx: PassContext, object: T): Promise<Outcome>;
  reconcileAbsent?(ctx: PassContext): Promise<Outcome>;
}
