import type { Context } from "hono";
import { Hono } from "hono/tiny";
import {
  bearerMatches,
  bearerToken,
  memoryReplayGuard,
  type RelayRefusal,
  relaySignedRequest,
  type SignedRelayRequest,
} from "../../auth/index.ts";
import { readBodyCapped } from "../../streams/index.ts";
import {
  type BatchSlots,
  type BatchSource,
  bodyTimeoutMessage,
  defaultBodyTimeoutMs,
  defaultMaxConcurrentBatches,
  type IntakeOptions,
  type IntakeStatus,
  MalformedBatchError,
  type MappedBatch,
} from "./contract.ts";
import { pubsubHandler } from "./pubsub.ts";

export {
  type BatchSlots,
  type BatchSource,
  bodyTimeoutMessage,
  defaultBodyTimeoutMs,
  defaultMaxConcurrentBatches,
  type IntakeBatch,
  type IntakeCredentials,
  type IntakeOptions,
  type IntakeParts,
  type IntakeStatus,
  MalformedBatchError,
  type MappedBatch,
} from "./contract.ts";

/**
 * The intake function: `POST /v1/events` takes audit `EventList`s (bearer token) and relay
 * batches (HMAC signature), maps them to deduplicated reconcile requests and enqueues them.
 * `GET /healthz` answers 200. `POST /v1/events/pubsub` takes Pub/Sub push deliveries of GKE audit
 * log entries (see {@link pubsubHandler}).
 *
 * It rejects before it reads: a request without a valid bearer token, or without well-formed
 * signature headers whose timestamp is inside the window (and not in the future), is refused
 * from its headers alone; only then is the body read, as a stream cut off at `maxBodyBytes`.
 * A relay batch's signature is accepted once per window (a replay is 409).
 *
 * Answers: 202 with the counts and the requests enqueued; 401 unauthenticated; 400 malformed;
 * 408 body slower than the body deadline; 409 replayed; 413 over the size cap; 503 (Retry-After)
 * over the concurrency bound or when enqueueing failed.
 *
 * @example
 * const app = createIntakeApp({ auditToken, relaySecret, maxBodyBytes: 4 << 20, ... });
 * serve({ fetch: app.fetch, port: 8080 });
 */
export function createIntakeApp(opts: IntakeOptions): Hono {
  const app = new Hono();
  const replayGuard = opts.replayGuard ?? memoryReplayGuard();
  const maxConcurrent = opts.maxConcurrentBatches ?? defaultMaxConcurrentBatches;
  const credentials = opts.credentials ?? (() => opts);
  let inFlight = 0;
  const bodyBudget = maxConcurrent * opts.maxBodyBytes;
  let bodyBytes = 0;
  const busy = (c: Context) => {
    opts.metrics.count("kubefn_intake_rejected_total", { reason: "Busy" });
    c.header("Retry-After", "1");
    return c.json({ error: "intake is busy; retry", reason: "Busy" }, 503);
  };
  const slots: BatchSlots = {
    check(c) {
      return inFlight < maxConcurrent ? undefined : busy(c);
    },
    admit(c) {
      if (inFlight < maxConcurrent) {
        inFlight++;
        return undefined;
      }
      return busy(c);
    },
    release() {
      inFlight--;
    },
    body() {
      let held = 0;
      return {
        admit(bytes) {
          if (bodyBytes + bytes > bodyBudget) return false;
          bodyBytes += bytes;
          held += bytes;
          return true;
        },
        release() {
          bodyBytes -= held;
          held = 0;
        },
      };
    },
    busy,
  };

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.post("/v1/events", async (c) => {
    const relay = relayOf(c);
    if (relay && "refused" in relay) return refuse(c, relay.refused);
    const signed = relay?.signed;
    const source: BatchSource = signed ? "relay" : "audit";
    if (!signed) {
      const token = bearerToken(c.req.header("authorization"));
      const { auditToken } = credentials();
      if (!auditToken || !(await bearerMatches(token, auditToken))) {
        return reject(c, 401, "Unauthenticated", "a bearer token or a relay signature is required");
      }
    }

    const full = slots.check(c);
    if (full) return full;
    const bytes = slots.body();
    let admitted = false;
    try {
      const read = await readBodyCapped(
        c.req.raw,
        opts.maxBodyBytes,
        opts.bodyTimeoutMs ?? defaultBodyTimeoutMs,
        bytes.admit,
      );
      if (!read.ok && read.reason === "BodyTimeout") return reject(c, 408, read.reason, bodyTimeoutMessage);
      if (!read.ok && read.reason === "Busy") return slots.busy(c);
      if (!read.ok) {
        opts.metrics.count("kubefn_intake_rejected_total", { reason: "TooLarge" });
        return c.json({ error: `batch larger than ${opts.maxBodyBytes} bytes`, reason: "TooLarge" }, 413);
      }
      const taken = slots.admit(c);
      if (taken) return taken;
      admitted = true;
      const body = read.text;
      const refused = await signed?.verify(body);
      if (refused) return refuse(c, refused);

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
      return await enqueued(c, source, mapped, signed);
    } finally {
      signed?.settled();
      bytes.release();
      if (admitted) slots.release();
    }
  });

  app.post("/v1/events/pubsub", pubsubHandler(opts, { reject, refuse, relayOf, enqueued, slots }));

  app.onError((err, c) => {
    opts.log.error("intake failed", { error: String(err) });
    opts.metrics.count("kubefn_intake_errors_total");
    return c.json({ error: "intake could not enqueue the batch; retry" }, 503);
  });

  function reject(c: Context, status: IntakeStatus, reason: string, message: string) {
    opts.metrics.count("kubefn_intake_rejected_total", { reason });
    return c.json({ error: message, reason }, status);
  }
  /** The relay signature of a request to either entry, checked against one replay guard. */
  function relayOf(c: Context) {
    return relaySignedRequest((name) => c.req.header(name), {
      secret: credentials().relaySecret,
      nowSeconds: opts.clock.now().getTime() / 1000,
      windowSeconds: opts.replayWindowSeconds,
      replays: replayGuard,
    });
  }
  function refuse(c: Context, r: RelayRefusal) {
    if (r.status === 503) c.header("Retry-After", "1");
    return reject(c, r.status, r.reason, r.message);
  }
  /** Enqueues what a batch mapped to, then remembers its signature and answers 202 with the counts. */
  async function enqueued(
    c: Context,
    source: BatchSource | "pubsub",
    mapped: MappedBatch,
    signed: SignedRelayRequest | undefined,
    extra: Record<string, unknown> = {},
  ) {
    const batch = opts.batch?.() ?? { log: opts.log, enqueue: opts.enqueue, end: () => undefined };
    const sent = mapped.messages.length;
    try {
      if (sent > 0) await batch.enqueue(mapped.messages);
    } catch (err) {
      batch.end({ source, enqueued: 0, failed: true });
      throw err;
    }
    signed?.accepted();
    // Counts only: the answer's requests name objects, which the log never needs.
    batch.log.info("intake batch", { source, enqueued: sent, ...mapped.counts });
    batch.end({ source, enqueued: sent, failed: false });
    opts.metrics.count("kubefn_intake_batches_total", { source });
    opts.metrics.count("kubefn_intake_requests_total", { source }, sent);
    const requests = mapped.messages.map((m) => m.request);
    return c.json({ source, ...extra, enqueued: requests.length, requests, counts: mapped.counts }, 202);
  }

  return app;
}
