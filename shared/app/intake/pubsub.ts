import type { Context, Handler } from "hono";
import { auditEventFromLogEntry, PushDeliveryError, parsePushDelivery } from "../../audit-export/index.ts";
import {
  bearerToken,
  KeysUnavailableError,
  type SignedRelayRequest,
  verifyPushToken,
} from "../../auth/index.ts";
import { readBodyCapped } from "../../streams/index.ts";
import {
  bodyTimeoutMessage,
  defaultBodyTimeoutMs,
  type IntakeOptions,
  type IntakeParts,
  type MappedBatch,
} from "./contract.ts";

export type { PubSubOptions } from "./contract.ts";

type Acked = { reason: string; detail: string };

/**
 * `POST /v1/events/pubsub`: a Pub/Sub push delivery of one Cloud Logging entry (a GKE audit
 * record, from a Log Router sink), authenticated by the push subscription's OIDC token, or by the
 * relay's HMAC signature where a forwarder in front cannot pass the token on. The entry maps
 * through the same audit mapping as `POST /v1/events`.
 *
 * Answers as Pub/Sub expects (2xx acknowledges, anything else is redelivered with backoff):
 * 202 mapped and enqueued; 200 acknowledged without work, with the reason — well-formed but
 * irrelevant (another service, a read), or malformed beyond repair (not JSON, not a push
 * envelope, data not base64, over the size cap), since a redelivery would be the same bytes;
 * 401 no or bad credentials, 403 a Google token for another audience or service account (both
 * fixable by configuration, so redelivery is right); 503 the keys or the queue are unreachable.
 * Nothing is enqueued unless the delivery is authenticated. A signed delivery is checked as a
 * relay batch is: headers before the body, and its signature accepted once (`relayOf`, shared
 * with `POST /v1/events`; a replay is 409).
 */
export function pubsubHandler(
  opts: IntakeOptions,
  { reject, refuse, relayOf, enqueued, slots }: IntakeParts,
): Handler {
  const ack = (c: Context, why: Acked) => {
    opts.metrics.count("kubefn_intake_acknowledged_total", { source: "pubsub", reason: why.reason });
    opts.log.warn("Pub/Sub delivery acknowledged without work", { ...why });
    return c.json({ source: "pubsub", enqueued: 0, acknowledged: why.reason, detail: why.detail }, 200);
  };

  /** Checks the OIDC token (the header alone); undefined when it passes. */
  const checkToken = async (c: Context): Promise<Response | undefined> => {
    const policy = opts.pubsub?.token;
    if (!policy) return reject(c, 401, "NotConfigured", "Pub/Sub push intake is not configured");
    const token = bearerToken(c.req.header("authorization"));
    try {
      const verdict = await verifyPushToken(token, policy, opts.clock.now().getTime() / 1000);
      if (!verdict.ok) {
        return reject(c, verdict.status, verdict.reason, "the push subscription's OIDC token is required");
      }
    } catch (err) {
      if (!(err instanceof KeysUnavailableError)) throw err;
      opts.log.error("Pub/Sub token keys unavailable", { error: err.message });
      return reject(c, 503, "KeysUnavailable", "the token's signing keys could not be fetched; retry");
    }
    return undefined;
  };

  return async (c) => {
    const relay = relayOf(c);
    if (relay && "refused" in relay) return refuse(c, relay.refused);
    const signed = relay?.signed;
    if (!signed) {
      const refused = await checkToken(c);
      if (refused) return refused;
    }
    const full = slots.check(c);
    if (full) return full;
    const bytes = slots.body();
    try {
      return await afterHeaders(c, signed, bytes.admit);
    } finally {
      signed?.settled();
      bytes.release();
    }
  };

  async function afterHeaders(
    c: Context,
    signed: SignedRelayRequest | undefined,
    admitBytes: (bytes: number) => boolean,
  ): Promise<Response> {
    const read = await readBodyCapped(
      c.req.raw,
      opts.maxBodyBytes,
      opts.bodyTimeoutMs ?? defaultBodyTimeoutMs,
      admitBytes,
    );
    if (!read.ok && read.reason === "BodyTimeout") return reject(c, 408, read.reason, bodyTimeoutMessage);
    if (!read.ok && read.reason === "Busy") return slots.busy(c);
    const full = slots.admit(c);
    if (full) return full;
    try {
      return await afterBody(c, signed, read);
    } finally {
      slots.release();
    }
  }

  async function afterBody(
    c: Context,
    signed: SignedRelayRequest | undefined,
    read: Awaited<ReturnType<typeof readBodyCapped>>,
  ): Promise<Response> {
    if (!read.ok) {
      // A token-authenticated delivery that is too large would come again byte for byte: ack it.
      // A signed one cannot be verified without its whole body: refuse it.
      if (!signed) {
        return ack(c, { reason: "TooLarge", detail: `delivery larger than ${opts.maxBodyBytes} bytes` });
      }
      return reject(c, 413, "TooLarge", `delivery larger than ${opts.maxBodyBytes} bytes`);
    }
    const body = read.text;
    const refused = await signed?.verify(body);
    if (refused) return refuse(c, refused);
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return ack(c, { reason: "InvalidJSON", detail: "the delivery is not JSON" });
    }
    let entry: unknown;
    let messageId: string | undefined;
    if (typeof json === "object" && json !== null && "protoPayload" in json) {
      entry = json; // a push subscription with --push-no-wrapper posts the data itself
    } else {
      try {
        const delivery = parsePushDelivery(json);
        messageId = delivery.messageId;
        entry = JSON.parse(delivery.data);
      } catch (err) {
        const detail = err instanceof PushDeliveryError ? err.message : "message.data is not JSON";
        return ack(c, { reason: "MalformedDelivery", detail });
      }
    }
    const reading = auditEventFromLogEntry(entry);
    if ("skip" in reading) return ack(c, { reason: "NotKubernetesAudit", detail: reading.skip });
    const mapped: MappedBatch = await opts.map("audit", {
      kind: "EventList",
      apiVersion: "audit.k8s.io/v1",
      items: [reading.event],
    });
    return enqueued(c, "pubsub", mapped, signed, messageId ? { messageId } : {});
  }
}
