/**
 * The intake's contract: its options, the batches it maps, and the parts its routes share.
 */
import type { Context } from "hono";
import type {
  PushTokenPolicy,
  RelayRefusal,
  ReplayGuard,
  relaySignedRequest,
  SignedRelayRequest,
} from "../../auth/index.ts";
import type { Clock, Log, Metrics, PassMessage } from "../../runtime/index.ts";

/** The refusals intake answers with. */
export type IntakeStatus = 400 | 401 | 403 | 408 | 409 | 413 | 503;

/** What `createIntakeApp` lends the Pub/Sub entry (pubsub.ts), so both answer alike. */
export interface IntakeParts {
  reject(c: Context, status: IntakeStatus, reason: string, message: string): Response;
  refuse(c: Context, refusal: RelayRefusal): Response;
  relayOf(c: Context): ReturnType<typeof relaySignedRequest>;
  enqueued(
    c: Context,
    source: "pubsub",
    mapped: MappedBatch,
    signed: SignedRelayRequest | undefined,
    extra?: Record<string, unknown>,
  ): Promise<Response>;
  /** The batches in flight, shared with `POST /v1/events`. */
  slots: BatchSlots;
}

/** Which sender a batch came from; decides how it is authenticated and decoded. */
export type BatchSource = "audit" | "relay";

/** What the runtime's event mapping made of one batch. */
export interface MappedBatch {
  messages: PassMessage[];
  /** Events dropped on purpose (status writes, own writes, reads, failures) or skipped as malformed. */
  counts: Record<string, number>;
}

/**
 * Thrown by `map` when the batch envelope itself is not what the source sends (wrong kind, no
 * items list). Answered with 400; events inside a valid envelope are skipped, not thrown.
 */
export class MalformedBatchError extends Error {
  override readonly name = "MalformedBatchError";
}

/** What intake authenticates a batch with; a credential that is unset turns its source off. */
export interface IntakeCredentials {
  auditToken?: string;
  relaySecret?: string;
}

export interface IntakeOptions {
  /** Bearer token the API server's audit webhook presents. Audit intake is off when unset. */
  auditToken?: string;
  /** HMAC secret shared with the relay. Relay intake is off when unset. */
  relaySecret?: string;
  /**
   * The credentials of each request, read per request: a platform that re-reads rotated secrets
   * (Lambda, from Secrets Manager) passes them here; `auditToken` and `relaySecret` when unset.
   */
  credentials?: () => IntakeCredentials;
  /** Pub/Sub push deliveries of GKE audit log entries (`POST /v1/events/pubsub`). */
  pubsub?: PubSubOptions;
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Signatures seen within the window; default one in memory per app (see shared/auth/replay.ts). */
  replayGuard?: ReplayGuard;
  /**
   * Batches processed at once by this instance (`/v1/events` and `/v1/events/pubsub` together),
   * once their bodies have arrived; more get 503 with Retry-After. Bodies being read share a
   * budget of this many times `maxBodyBytes` ({@link BatchSlots}). Default
   * {@link defaultMaxConcurrentBatches}.
   */
  maxConcurrentBatches?: number;
  /**
   * How long a body may take to arrive once its headers are checked; a slower one is answered 408
   * and its bytes freed. Default {@link defaultBodyTimeoutMs}. Relay signature headers can be
   * well-formed without the secret, so without this deadline anyone could hold the body budget
   * by sending bodies a byte at a time.
   */
  bodyTimeoutMs?: number;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  map(source: BatchSource, batch: unknown): Promise<MappedBatch>;
  enqueue(messages: PassMessage[]): Promise<void>;
  /**
   * One batch's own log and queue, opened as its messages are enqueued (kubefn: a trace of its
   * own, which the messages carry and the `intake batch` line names), and told once how it ended.
   * `log` and `enqueue` serve every batch when unset.
   */
  batch?(): IntakeBatch;
}

/** The log and queue of one intake batch; `end` is called once, after its answer is decided. */
export interface IntakeBatch {
  log: Log;
  enqueue(messages: PassMessage[]): Promise<void>;
  end(outcome: { source: string; enqueued: number; failed: boolean }): void;
}

/** Default of {@link IntakeOptions.maxConcurrentBatches}. */
export const defaultMaxConcurrentBatches = 16;
/** Default of {@link IntakeOptions.bodyTimeoutMs}: a 4 MiB batch at 1 Mbit/s arrives in time. */
export const defaultBodyTimeoutMs = 30_000;

/** The 408 answer's message. */
export const bodyTimeoutMessage = "the body did not arrive within the body deadline";

/**
 * The batches in flight on one intake instance, shared by its routes. A slot is taken once a
 * batch's body has arrived, for its verification, mapping and enqueueing: a body still arriving
 * holds no slot, only the bytes it has sent so far, from a budget of `maxConcurrentBatches` ×
 * `maxBodyBytes` shared by every body being read. So whoever sends well-formed headers without
 * the secret and then a body a byte at a time holds a few bytes, not a slot: to keep others out
 * they must keep the whole budget arrived and unfinished.
 */
export interface BatchSlots {
  /** Answers 503 with Retry-After when every slot is taken (before a body is read), and takes none. */
  check(c: Context): Response | undefined;
  /** Takes a slot, or answers 503 with Retry-After (and takes none). */
  admit(c: Context): Response | undefined;
  release(): void;
  /** One body's share of the byte budget: `admit` per chunk, `release` once the request ends. */
  body(): { admit(bytes: number): boolean; release(): void };
  /** The 503 answer (Retry-After) for a body the budget refused. */
  busy(c: Context): Response;
}

/** How intake authenticates Pub/Sub push deliveries. */
export interface PubSubOptions {
  /** Google-signed OIDC tokens of the push subscription; off when unset. */
  token?: PushTokenPolicy;
}
