import type { EventRecorder, KubeObject, ObjectKey, Resource } from "../../kube/index.ts";
import type { Context, Request, StateChangesOf } from "../core/index.ts";
import type { DriftDeclaration } from "./drift.ts";
import type { ErrorPolicy } from "./error-policy.ts";
import type { Outcome } from "./outcome.ts";
import type { Readiness } from "./readiness.ts";

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

/**
 * The trigger reason of a pass intake sent only for status writes of owned objects (see
 * `ControllerDefinition.readinessFrom`): their readiness may have changed, nothing else did.
 */
export const ownedStatusReason = "owned-status";

/**
 * The trigger reason of a pass intake sent for a primary's creation alone; its message carries the
 * created object's UID. A primary whose finalizer is declared `addUnread` gets it on that pass
 * without a read first: the finalizer patch, guarded by that UID and by the object holding no
 * finalizer, answers the object as stored (see `FinalizerDeclaration.addUnread`).
 */
export const createdReason = "created";

/** Context of one pass: the world, plus the message's attempt count. */
export interface PassContext extends Context {
  request: Request;
  attempt: number;
  /**
   * Kubernetes Events about the primary (reporting controller `kubefn.dev/<name>`), for what the
   * pass *did* (an instance created, replaced, deleted). Condition flips are recorded by the
   * executor (see `conditionEvents`). Absent in tests that build a context by hand.
   */
  events?: EventRecorder;
  /**
   * The sweep's drift reason (e.g. `status:Ready`) when the pass runs on the sweep's fresh
   * decision: the message carries the listed objects, listed at most `LISTED_MAX_AGE_SECONDS`
   * ago. What the controller's decision checked before it reached this reason was in place in
   * those lists, so the pass may skip reading it again. Undefined for every other pass.
   */
  drift?: string | undefined;
  /**
   * The reason an earlier pass of this object gave its follow-up (`requeueAfter(s, reason)`),
   * when this pass is that follow-up and nothing else asked for it: a queue that merges a
   * follow-up with any other message for the key keeps the other's trigger. Undefined for every
   * other pass, and for a retry.
   */
  followUp?: string | undefined;
  /**
   * The reason intake gave this event-triggered pass, when it gave one: {@link ownedStatusReason}
   * when nothing but status writes of owned objects brought it (a queue that merges it with any
   * other message for the key keeps the other's trigger). A hint for what to read, never a fact:
   * whoever writes into a channel chooses it. Undefined for every other pass, and for a retry.
   */
  event?: string | undefined;
}

/**
 * How a condition's flips read as Events: `positive` — True is healthy (False is a Warning);
 * `negative` — True is the problem (True is a Warning); `neutral` — both are Normal.
 */
export type ConditionPolarity = "positive" | "negative" | "neutral";

/** Which condition flips become Events, and how they read (see `conditionEvents`). */
export interface ConditionEventPolicy {
  conditions: Readonly<Record<string, ConditionPolarity>>;
  /** Reasons that mean "on its way" (e.g. `Provisioning`): Normal even in the unhealthy status. */
  progressReasons?: readonly string[];
}

/**
 * What a live object (no deletionTimestamp) wants of the controller's finalizer: `hold` — carry it
 * (the runtime adds it before the pass's reconcile); `release` — no longer carry it (when held,
 * the runtime runs `cleanup` as on deletion and removes it once cleanup is done); `as-is` —
 * neither (an invalid object: nothing is added, and a finalizer it holds stays).
 */
export type FinalizerWish = "hold" | "release" | "as-is";

/**
 * The controller's finalizer, owned by the runtime (kube-rs's `finalizer()`, Metacontroller's
 * finalize hook): the controller declares it, and each pass (see `runPass`) keeps it as declared.
 *
 * | object | the pass |
 * | --- | --- |
 * | live, `want` hold, finalizer missing | adds it (merge patch guarded by the resourceVersion read), then reconciles |
 * | live, `want` release, finalizer held | `cleanup`; once done removes the finalizer, then reconciles |
 * | live, otherwise | reconciles |
 * | deleting, finalizer held | `cleanup` instead of `reconcile`; once done removes the finalizer |
 * | deleting, finalizer not held | nothing (not ours to finish; no status write) |
 *
 * Only this one name is ever added or removed: foreign finalizers and ownerReferences are left as
 * they are, and every write is guarded by the resourceVersion (a Conflict requeues at once, as any
 * conflict does). The sweep sends a pass (drift reason `finalizer`) to a live object whose
 * finalizer is not as it wants, unless its error latch holds it.
 *
 * Caveats: the finalizer is never added to an object being deleted. A controller that was refused
 * at start (shared/runtime/pass/stopped.ts) declares none, so deleting objects keep theirs until it
 * starts again.
 */
export interface FinalizerDeclaration<T extends KubeObject = KubeObject> {
  /** The finalizer's name, domain-qualified (e.g. the seed's `subrelay.example.com/finalizer`). */
  name: string;
  /**
   * What a live object wants (see {@link FinalizerWish}); pure, from the object as read. Default:
   * `hold` for every object.
   */
  want?(object: KubeObject): FinalizerWish;
  /**
   * On the pass a primary's creation brought ({@link createdReason}), or the sweep's for a live
   * object it listed without the finalizer (drift reason `finalizer`), add the finalizer before
   * reading the object: one JSON patch that tests the UID the message names and that the object
   * holds no finalizer, whose answer is the object as the API server stores it — the read the
   * pass would have made, one request fewer. Where a test fails (another object of the name, a
   * finalizer already there, or a deletion begun) the pass reads the object as every other does.
   * `want` is asked of the answer: a finalizer it does not want is taken off again at once.
   *
   * Caveats: only the UID comes from the event, and only as a precondition; nothing the pass
   * writes rests on the event's body.
   */
  addUnread?: boolean;
  /**
   * Releases what the object held (kube-rs's `Event::Cleanup`), on a private copy of the object
   * whose status it may change (progress, a blocked deletion's reason). Return `done()` once
   * nothing is left, and the runtime removes the finalizer (with the outcome's metadata, see
   * `Outcome.withMetadata`, in the same patch); `requeueAfter(s)` or `awaitSweep()` while work is
   * under way; `failed(err)` when it failed (the error policy and backoff apply, the finalizer
   * stays). Must be idempotent, like `reconcile`.
   */
  cleanup(ctx: PassContext, object: T): Promise<Outcome>;
}

/**
 * One operator, as kubefn runs it.
 *
 * `reconcile` must be idempotent: two passes for one key may run at once on serverless
 * platforms. It receives a private copy of the object and may change `status` in place; the
 * executor writes the status once, only if it changed, guarded by the resourceVersion read, and
 * sets `status.observedGeneration` to `metadata.generation` (see `observedGeneration`).
 * The controller's finalizer is the runtime's (see `finalizer`); annotations and labels of the
 * primary come with the Outcome (`Outcome.withMetadata`), written by the runtime.
 *
 * Errors: return `failed(err)` (or throw); the executor classifies with shared/kube's
 * `classifyError`, retries per class (transient: backoff; conflict: now; quota: 60 s;
 * permanent: never) and writes what the controller's `errorPolicy` declares (the latch, the
 * quota condition).
 *
 * Caveats: `reconcileAbsent` runs when the primary object does not exist (deleted, or a
 * synthetic key such as the Site singleton request `__singletons`); without it an absent object
 * is `done`. When the controller writes the primary itself through `ctx.kube`, it should copy the
 * returned `metadata.resourceVersion` onto its object, or the executor's guarded status write
 * meets a Conflict and requeues at once (harmless, one more pass).
 */
export interface ControllerDefinition<T extends KubeObject = KubeObject> {
  name: string;
  for: Resource;
  /** Kinds whose controller ownerReference points at a `for` object. */
  owns?: Resource[];
  /**
   * Owned kinds whose readiness the primary reports (controller-runtime's `Owns()` with no
   * predicate, for status alone): a write of such an object's `status` subresource — a
   * StatefulSet's ready replicas, a Deployment's availability — maps to its owner as every owned
   * change does (the controlling ownerReference of the body the event carries, else
   * {@link ownerFromKey}), with trigger reason {@link ownedStatusReason}. Each must be in `owns`.
   * Status writes of every other owned kind are dropped.
   *
   * Caveats: the event only names a key (a message is not a fact): the pass reads the primary and
   * what it reports from the API server, and a forged event costs at most that read. The
   * `ownedPredicate` is not asked: a status write changes no generation. An audit event carries no
   * earlier status, so every status write maps, not only a flip (a batch deduplicates them).
   */
  readinessFrom?: Resource[];
  /**
   * Mappers for status writes of a {@link readinessFrom} kind that no controlling ownerReference
   * names a primary of this controller (a workload several primaries report on, e.g. a
   * cluster-wide Deployment every Site's condition follows): their requests carry the reason
   * {@link ownedStatusReason} too. At most one per kind, each kind in `readinessFrom`.
   *
   * Caveats: run like {@link watches}' mappers (after the batch is read; one that throws is
   * logged and counted); the body, when the event carries one, is the writer's word.
   */
  readinessWatches?: Watch[];
  watches?: Watch[];
  /**
   * Condition types this controller publishes, each once. Types are per kind: two controllers may
   * both publish one (every primary has its own `Ready`).
   */
  conditionTypes: string[];
  /**
   * Drift interval: the sweep revisits every object at least this often. A follow-up later than
   * this is not sent. At least 60 (the sweep runs every minute).
   */
  resyncSeconds: number;
  /**
   * Handlers of the sweep's fanned-out work, by task name (e.g. `probe`): a job (`JobMessage`,
   * `job: { controller, task, objects, data, due }`) runs `jobs[task](ctx, objects, data, { due })`
   * instead of a pass, and returns counts for the log line.
   *
   * Caveats: a job that fails is logged and counted, never retried: the next sweep plans the
   * work again.
   */
  jobs?: Record<
    string,
    (
      ctx: Context,
      objects: readonly KubeObject[],
      data?: unknown,
      job?: { due?: number },
    ) => Promise<Record<string, number>>
  >;
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
   * What a failed pass means for the object (kube-rs's `error_policy`): which errors latch and
   * what the latch writes, the quota condition and retry (see {@link ErrorPolicy}). Without it,
   * errors are retried by class and write nothing.
   */
  errorPolicy?: ErrorPolicy;
  /**
   * Conditions whose flips become Events on the primary: after a successful status write, each
   * condition listed in `conditions` whose status or reason changed is recorded once (reason = the condition's
   * reason, note = `<type>=<status>: <message>`). Unlisted conditions record nothing; the
   * error policy's latch condition counts as `negative`.
   *
   * Caveats: only changes are recorded, so steady state writes no Events; a repeat of the same
   * flip (e.g. Healthy going False again later with the same reason and message) becomes a
   * series on one Event.
   */
  conditionEvents?: ConditionEventPolicy;
  /**
   * The state changes users route (state-changes.ts) between the status a pass read and the one
   * it wrote: published through `ctx.stateChanges` after a successful status write, never
   * otherwise. Pure.
   */
  stateChanges?: StateChangesOf;
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
   * (see shared/runtime/definition/predicates.ts, e.g. `generationChanged`). Default: every change. Owned
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
  /**
   * The object's summary — `Ready`, and `Reconciling` or `Stalled` (see {@link Readiness}) — from
   * the object as the pass and the error policy left it, and the pass's outcome. The executor
   * writes it last, stamped with the generation, so `kubectl wait --for=condition=Ready`, kstatus
   * (Flux) and Argo CD's health scripts read every kind alike. `outcome` is absent when a drift
   * decision asks (see `readinessDiffers`). Undefined leaves the summary as it is.
   *
   * Caveats: a latched pass is skipped whole, so the summary the latching pass wrote stays until
   * the generation changes. Keep it pure and cheap: it runs on every pass.
   */
  readiness?(object: KubeObject, outcome?: Outcome): Readiness | undefined;
  /**
   * The finalizer the runtime keeps for this controller (see {@link FinalizerDeclaration}): when
   * declared, `reconcile` never sees an object being deleted — `cleanup` does.
   */
  finalizer?: FinalizerDeclaration<T>;
  reconcile(ctx: PassContext, object: T): Promise<Outcome>;
  reconcileAbsent?(ctx: PassContext): Promise<Outcome>;
}
