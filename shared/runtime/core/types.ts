import type { Kube, KubeObject, Resource } from "../../kube/index.ts";
import type { SweepMemo } from "./memo.ts";
import type { Clock, Log, Metrics } from "./observe.ts";
import type { StateChangeSink } from "./state-changes.ts";
import type { StatusSeal } from "./status-seal.ts";

/**
 * A reconcile request is only a key. It says nothing about what happened: a pass reads the
 * current state. `controller` names the registered controller that handles it.
 */
export interface Request {
  controller: string;
  namespace?: string;
  name: string;
}

/**
 * What brought a pass about. Carried in the message, printed in the pass's log line and counted
 * by `kubefn_pass_triggers_total{controller,trigger,reason}`.
 *
 * - `audit`, `relay`: a change the intake mapped (the API server's audit webhook, the watch relay);
 * - `follow-up`: the pass's own delayed message (requeue or retry);
 * - `drift`: the sweep's list showed the object needs a pass; `reason` says why (e.g.
 *   `missing:ConfigMap`, `generation`, `instance-gone`);
 * - `safety-net`: the sweep's long-interval revisit, whatever the lists say;
 * - `start`: a host's first sweep after start, which sends every object once.
 *
 * A job ({@link JobMessage}) has no trigger: its task says what it is.
 */
export type TriggerKind = "audit" | "relay" | "follow-up" | "drift" | "safety-net" | "start";

export interface Trigger {
  kind: TriggerKind;
  /** Why, for `drift` and a reasoned `follow-up` (a short stable token, safe as a metric label). */
  reason?: string;
}

/** `kind` or `kind:reason`, as printed and counted. */
export function describeTrigger(trigger: Trigger | undefined): string {
  if (!trigger) return "unknown";
  return trigger.reason ? `${trigger.kind}:${trigger.reason}` : trigger.kind;
}

/**
 * What a message on the queue carries: a {@link PassMessage} (one reconcile pass for one key) or
 * a {@link JobMessage} (a piece of the sweep's fanned-out work, e.g. probes), told apart by
 * `kind`. Read from a queue body by `openEnvelope` (envelope.ts), which also reads the previous
 * releases' shapes.
 *
 * @example
 * switch (message.kind) {
 *   case "job": return runJob(ctx, registry, message);
 *   case "pass": case undefined: return runPass(ctx, registry, message);
 *   default: return assertNever(message);
 * }
 */
export type Message = PassMessage | JobMessage;

/**
 * The name of the one cluster a deployment without declared clusters reconciles, and the cluster
 * of every message an envelope before version 3 carried.
 */
export const DEFAULT_CLUSTER = "default";

/** One reconcile pass for one key, plus the attempt count for stateless backoff. */
export interface PassMessage {
  /** `"pass"`, or absent: every pass before this envelope version, and most senders, omit it. */
  kind?: "pass";
  /** The envelope's version (`ENVELOPE_VERSION`); absent in messages of releases up to 0.1.0. */
  v?: number;
  /** The cluster whose object this is ({@link clusterOf}); absent before version 3: the default. */
  cluster?: string;
  /** W3C `traceparent` of the chain this message belongs to (see trace.ts). */
  traceparent?: string;
  request: Request;
  /** 0 for an event-triggered pass; n for the n-th retry after transient failures. */
  attempt: number;
  /** Why this pass runs; absent in messages from older senders ("unknown"). */
  trigger?: Trigger;
  /**
   * Objects the sweep listed that this pass will read (a SubPool's derived objects, never the
   * primary: every pass reads its primary from the API server, so no spec it writes from is
   * older than the one stored): the pass's first GET of each is answered from here.
   *
   * Caveats: a read, not the truth: writes stay guarded by each object's resourceVersion. Only
   * kubefn's own listing: over a platform queue the bodies need a `mac` that verifies, else the
   * pass reads them itself (envelope.ts).
   */
  listed?: KubeObject[];
  /** kubefn's MAC over `listed` when it travels over a platform queue (message-mac.ts). */
  mac?: string;
  /**
   * The UID of the object this message was decided for (a follow-up carries its pass's object's;
   * the sweep its listed object's). A pass that finds another UID under the name — the object was
   * deleted and recreated since — drops the message: the new object has its own events.
   */
  uid?: string;
  /** When the sweep listed `listed` (ms since the epoch); older ones are read afresh. */
  listedAt?: number;
}

/**
 * A job: a piece of the sweep's fanned-out work, run by its controller's `jobs[task]` handler
 * over `objects` (as the sweep listed them), never by the pass executor. No primary is read, no
 * status written, no follow-up sent, and it is never retried: the next sweep plans it again.
 */
export interface JobMessage {
  kind: "job";
  /** The envelope's version (`ENVELOPE_VERSION`). */
  v?: number;
  /** The cluster whose objects these are ({@link clusterOf}); absent before version 3: the default. */
  cluster?: string;
  /** W3C `traceparent` of the chain this message belongs to (see trace.ts). */
  traceparent?: string;
  job: Job;
  /** kubefn's MACs over the job's frame and each of its objects (message-mac.ts). */
  mac?: string[];
}

/** What a job does, and over which objects. */
export interface Job {
  /** The registered controller whose `jobs[task]` handler runs it. */
  controller: string;
  task: string;
  /**
   * Its place among its sweep's jobs of `task` (e.g. `30-0`: the probe shard of second 30, the
   * first of it). The same slot's job of the next sweep shares it, and replaces it where a queue
   * keys by {@link messageKey}; a job cut to fit a queue is `<slot>-1`, `<slot>-2`, ….
   */
  slot: string;
  objects: KubeObject[];
  /** The handler's own (e.g. probes taken). */
  data?: unknown;
  /**
   * When the sweep meant the job to run (ms since the epoch); absent in 0.1.0's messages. A job
   * delivered late may shed work whose next turn is nearer (see the probe handler).
   */
  due?: number;
}

/**
 * `message`, or, when it is larger than `maxBytes` as the queue counts (`sizeOf`), the message
 * without its attached objects (`listed`): its pass then reads them itself. A job is returned as
 * it is (it is cut to fit instead: message-fit.ts).
 */
export function fitted(message: Message, maxBytes: number, sizeOf: (message: Message) => number): Message {
  if (message.kind === "job" || !message.listed || sizeOf(message) <= maxBytes) return message;
  const { listedAt: _listedAt, listed: _listed, mac: _mac, ...bare } = message;
  return bare;
}

/**
 * The dedup key of a request, `controller/namespace/name` (namespace empty when cluster-scoped):
 * equal keys are the same reconcile work. Kubernetes names never contain "/", so keys are unique.
 */
export function requestKey(request: Request): string {
  return `${request.controller}/${request.namespace ?? ""}/${request.name}`;
}

/**
 * The dedup key of a job, `controller/task/slot` prefixed `job:` (no registered controller's
 * name has a colon, so it never equals a pass's {@link requestKey}).
 */
export function jobKey(job: Pick<Job, "controller" | "task" | "slot">): string {
  return `job:${job.controller}/${job.task}/${job.slot}`;
}

/**
 * The key of a message's work: a pass's {@link requestKey}, a job's {@link jobKey}, and `@` and its
 * cluster when that is not the default (no Kubernetes name, controller or slot has an `@`), so
 * that one object's name in two clusters is two keys on a queue both share.
 */
export function messageKey(message: Message): string {
  const key = message.kind === "job" ? jobKey(message.job) : requestKey(message.request);
  const cluster = clusterOf(message);
  return cluster === DEFAULT_CLUSTER ? key : `${key}@${cluster}`;
}

/** The cluster a message is for: its `cluster`, or the default's (every envelope before version 3). */
export function clusterOf(message: Pick<Message, "cluster">): string {
  return message.cluster ?? DEFAULT_CLUSTER;
}

/** The controller a message is for. */
export function messageController(message: Message): string {
  return message.kind === "job" ? message.job.controller : message.request.controller;
}

/** A message and the delay it is sent with ({@link Queue.sendEach}). */
export interface DelayedMessage {
  message: Message;
  delaySeconds: number;
}

/** Where follow-ups go. Platforms bind it to their queue's delayed delivery. */
export interface Queue {
  send(messages: Message[], delaySeconds?: number): Promise<void>;
  /**
   * Sends messages each with a delay of its own in as few calls as the platform takes (SQS: ten
   * to a SendMessageBatch, each entry its own `DelaySeconds`, billed per 64 KB of the call — a
   * sweep's probe shards are then about a third of the requests). Unset where the platform gains
   * nothing: callers send each with {@link send}. A failed call may leave earlier calls' messages sent.
   */
  sendEach?(entries: readonly DelayedMessage[]): Promise<void>;
  /**
   * The largest message this queue takes, in UTF-8 bytes of its JSON (a platform's limit less its
   * own margin); the runtime cuts jobs and drops attached snapshots to fit it
   * (`fitToQueue`) before it seals a message. Unset: no limit (an in-process queue).
   */
  readonly maxMessageBytes?: number;
  /**
   * The largest pass that keeps its listed objects (SQS bills each 64 KB of a message);
   * `maxMessageBytes` when unset.
   */
  readonly maxPassBytes?: number;
}

/** Everything a pass may use from the world. Built by the platform adapter, never module state. */
export interface Context {
  /**
   * The cluster `kube` reaches: a declared cluster's name (`KUBEFN_CLUSTERS`), the
   * {@link DEFAULT_CLUSTER} when unset. What a route answers about an object names it.
   */
  cluster?: string;
  kube: Kube;
  queue: Queue;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  /** Random in [0, 1); injected so backoff jitter is testable. */
  random: () => number;
  /**
   * Reads shared by the passes of this platform invocation (a queue batch, a Lambda event, one
   * of the Node host's queue sends), each reused for at most {@link INVOCATION_READ_MAX_AGE_SECONDS}:
   * for state nobody's event reports (a shared gateway), never for the pass's own objects.
   * Absent outside an invocation: read directly.
   */
  memo?: SweepMemo;
  /**
   * kubefn's seal on the statuses it writes (runtime/core/status-seal.ts): passes seal what they write
   * and rewrite a status whose seal does not verify; intake and the sweep send such a primary a
   * pass. Absent: statuses are neither sealed nor checked.
   */
  seal?: StatusSeal;
  /**
   * Where state changes go (state-changes.ts): the platform's sink, bounded per invocation.
   * Absent: none are published.
   */
  stateChanges?: StateChangeSink;
}

/** How long one read serves the later passes of the same invocation (see {@link Context.memo}). */
export const INVOCATION_READ_MAX_AGE_SECONDS = 30;

export { type Clock, type Log, type LogLevel, logLevels, type Metrics } from "./observe.ts";
export type { Kube, KubeObject, Resource };
