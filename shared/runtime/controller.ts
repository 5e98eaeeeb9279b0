import type { KubeObject, ObjectKey, Resource } from "../kube/port.ts";
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
  object?: KubeObject;
}

/** A kind nobody owns whose changes matter to a controller (e.g. Secret → Proxies naming it). */
export interface Watch {
  resource: Resource;
  /** Which reconcile requests this change causes. May read the cluster through `ctx.kube`. */
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
 * executor writes the status once, only if it changed, guarded by the resourceVersion read.
 * Metadata and spec writes (finalizers, annotations) the controller makes itself through
 * `ctx.kube`.
 *
 * Caveats: `reconcileAbsent` runs when the primary object does not exist (deleted, or a
 * synthetic key such as the Site singleton request); without it an absent object is `done`.
 */
export interface ControllerDefinition<T extends KubeObject = KubeObject> {
  name: string;
  for: Resource;
  /** Kinds whose controller ownerReference points at a `for` object. */
  owns?: Resource[];
  watches?: Watch[];
  /** Condition types this controller publishes; must be unique across the registry. */
  conditionTypes: string[];
  /** Drift interval: the sweep revisits every object at least this often. */
  resyncSeconds: number;
  reconcile(ctx: PassContext, object: T): Promise<Outcome>;
  reconcileAbsent?(ctx: PassContext): Promise<Outcome>;
}
