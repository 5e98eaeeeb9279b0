import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { Hono } from "hono/tiny";
import type { Clock, Log, Message, Metrics } from "../../shared/runtime/types.ts";
import { type PubSubOptions, pubsubHandler } from "./pubsub.ts";
import { bearerMatches, SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBatch } from "./signature.ts";

/** Which sender a batch came from; decides how it is authenticated and decoded. */
export type BatchSource = "audit" | "relay";

/** What the runtime's event mapping made of one batch. */
export interface MappedBatch {
  messages: Message[];
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

export interface IntakeOptions {
  /** Bearer token the API server's audit webhook presents. Audit intake is off when unset. */
  auditToken?: string;
  /** HMAC secret shared with the relay. Relay intake is off when unset. */
  relaySecret?: string;
  /** Pub/Sub push deliveries of GKE audit log entries (`POST /v1/events/pubsub`). */
  pubsub?: PubSubOptions;
  maxBodyBytes: number;
  replayWindowSeconds: number;
  clock: Clock;
  log: Log;
  metrics: Metrics;
  map(source: BatchSource, batch: unknown): Promise<MappedBatch>;
  enqueue(messages: Message[]): Promise<void>;
}

/**
 * The intake function: `POST /v1/events` takes audit `EventList`s (bearer token) and relay
 * batches (HMAC signature), maps them to deduplicated reconcile requests and enqueues them.
 * `GET /healthz` answers 200. `POST /v1/events/pubsub` takes Pub/Sub push deliveries of GKE audit
 * log entries (see {@link pubsubHandler}).
 *
 * Answers: 202 with the counts and the requests enqueued; 401 unauthenticated; 400 malformed; 413
 * over the size cap.
 *
 * @example
 * const app = createIntakeApp({ auditToken, relaySecret, maxBodyBytes: 4 << 20, ... });
 * serve({ fetch: app.fetch, port: 8080 });
 */
export function createIntakeApp(opts: IntakeOptions): Hono {
  const app = new Hono();

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.post(
    "/v1/events",
    bodyLimit({
      maxSize: opts.maxBodyBytes,
      onError: (c) => {
        opts.metrics.count("kubefn_intake_rejected_total", { reason: "TooLarge" });
        return c.json({ error: `batch larger than ${opts.maxBodyBytes} bytes` }, 413);
      },
    }),
    async (c) => {
      const body = await c.req.text();
      const signature = c.req.header(SIGNATURE_HEADER);
      let source: BatchSource;
      if (signature !== undefined || c.req.header(TIMESTAMP_HEADER) !== undefined) {
        if (!opts.relaySecret) return reject(c, 401, "NotConfigured", "relay intake is not configured");
        const verdict = await verifyBatch(
          opts.relaySecret,
          body,
          { signature, timestamp: c.req.header(TIMESTAMP_HEADER) },
          opts.clock.now().getTime() / 1000,
          opts.replayWindowSeconds,
        );
        if (!verdict.ok) return reject(c, 401, verdict.reason, describe(verdict.reason));
        source = "relay";
      } else {
        const auth = c.req.header("authorization");
        const token = auth?.startsWith("Bearer ") ? auth.slice(7) : undefined;
        if (!opts.auditToken || !(await bearerMatches(token, opts.auditToken))) {
          return reject(c, 401, "Unauthenticated", "a bearer token or a relay signature is required");
        }
        source = "audit";
      }

      let batch: unknown;
      try {
        batch = JSON.parse(body);
      } catch (err) {
        return reject(c, 400, "InvalidJSON", `body is not JSON: ${(err as Error).message}`);
      }
      let mapped: MappedBatch;
      try {
        mapped = await opts.map(source, batch);
      } catch (err) {
        if (err instanceof MalformedBatchError) return reject(c, 400, "MalformedBatch", err.message);
        throw err;
      }
      if (mapped.messages.length > 0) await opts.enqueue(mapped.messages);
      opts.metrics.count("kubefn_intake_batches_total", { source });
      opts.metrics.count("kubefn_intake_requests_total", { source }, mapped.messages.length);
      return c.json(
        {
          source,
          enqueued: mapped.messages.length,
          requests: mapped.messages.map((m) => m.request),
          counts: mapped.counts,
        },
        202,
      );
    },
  );

  app.post("/v1/events/pubsub", pubsubHandler(opts, reject));

  app.onError((err, c) => {
    opts.log.error("intake failed", { error: String(err) });
    opts.metrics.count("kubefn_intake_errors_total");
    return c.json({ error: "intake could not enqueue the batch; retry" }, 503);
  });

  function reject(c: Context, status: 400 | 401 | 403 | 413 | 503, reason: string, message: string) {
    opts.metrics.count("kubefn_intake_rejected_total", { reason });
    return c.json({ error: message, reason }, status);
  }

  return app;
}

function describe(reason: string): string {
  switch (reason) {
    case "MissingSignature":
      return `relay batches need both ${SIGNATURE_HEADER} and ${TIMESTAMP_HEADER}`;
    case "MalformedSignature":
      return `${SIGNATURE_HEADER} must be sha256=<64 hex> and ${TIMESTAMP_HEADER} unix seconds`;
    case "StaleTimestamp":
      return "timestamp outside the replay window";
    default:
      return "signature does not match the body";
  }
}
