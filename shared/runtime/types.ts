import type { Kube, KubeObject, Resource } from "../kube/index.ts";

/**
 * A reconcile request is only a key. It says nothing about what happened: a pass reads the
 * current state. `controller` names the registered controller that handles it.
 */
export interface Request {
  controller: string;
  namespace?: string;
  name: string;
}

/** What a message on the queue carries: the key, plus the attempt count for stateless backoff. */
export interface Message {
  request: Request;
  /** 0 for an event-triggered pass; n for the n-th retry after transient failures. */
  attempt: number;
  /**
   * The primary as a list returned it seconds ago (the sweep attaches it), to save a GET.
   *
   * Caveats: it is a read, not the truth: every write of the pass is guarded by its
   * `metadata.resourceVersion`, so a stale snapshot costs one Conflict and an immediate requeue.
   */
  snapshot?: KubeObject;
  /**
   * The UID of the object this message was decided for (a follow-up carries its pass's object's;
   * the sweep its listed object's). A pass that finds another UID under the name — the object was
   * deleted and recreated since — drops the message: the new object has its own events.
   */
  uid?: string;
  /** When the sweep listed `snapshot` (ms since the epoch); an old snapshot is read afresh. */
  listedAt?: number;
}

/** Whether a queue message's body (JSON from any platform's queue) is a {@link Message}. */
export function isMessage(body: unknown): body is Message {
  if (typeof body !== "object" || body === null) return false;
  const { request, attempt } = body as Partial<Message>;
  return (
    typeof attempt === "number" &&
    typeof request === "object" &&
    request !== null &&
    typeof request.controller === "string" &&
    typeof request.name === "string" &&
    (request.namespace === undefined || typeof request.namespace === "string")
  );
}

/**
 * The dedup key of a request, `controller/namespace/name` (namespace empty when cluster-scoped):
 * equal keys are the same reconcile work. Kubernetes names never contain "/", so keys are unique.
 */
export function requestKey(request: Request): string {
  return `${request.controller}/${request.namespace ?? ""}/${request.name}`;
}

/** Where follow-ups go. Platforms bind it to their queue's delayed delivery. */
export interface Queue {
  send(messages: Message[], delaySeconds?: number): Promise<void>;
}

export interface Clock {
  now(): Date;
}

export interface Log {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface Metrics {
  count(name: string, labels?: Record<string, string>, value?: number): void;
  observe(name: string, value: number, labels?: Record<string, string>): void;
  gauge(name: string, value: number, labels?: Record<string, string>): void;
}

/** Everything a pass may use from the world. Built by the platform adapter, never module state. */
export interface Context {
  kube: Kube;
  queue: Queue;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  /** Random in [0, 1); injected so backoff jitter is testable. */
  random: () => number;
}

export type { Kube, KubeObject, Resource };
