import { isRecord } from "../guards/index.ts";
/**
 * Pub/Sub push deliveries: one message per HTTPS POST,
 *
 * ```json
 * { "message": { "data": "<base64>", "attributes": { "logging.googleapis.com/timestamp": "…" },
 *                "messageId": "136969346945", "publishTime": "2026-11-30T12:00:00.123Z" },
 *   "subscription": "projects/p/subscriptions/kubefn-audit" }
 * ```
 *
 * Pub/Sub takes 102, 200, 201, 202 and 204 as an acknowledgement and redelivers on anything else
 * (with backoff, until the subscription's retention or its dead-letter topic), so intake answers
 * 2xx for every delivery a retry cannot improve.
 */

/** A push delivery's envelope, checked; attributes and subscription are not read. */
export interface PushDelivery {
  messageId: string;
  /** The message's data, decoded from base64 as UTF-8. */
  data: string;
}

/** Why a delivery is not a push envelope. */
export class PushDeliveryError extends Error {
  override readonly name = "PushDeliveryError";
}

/**
 * Reads a push body (already JSON-parsed).
 *
 * @throws PushDeliveryError when it is not a push envelope or its data is not base64.
 */
export function parsePushDelivery(body: unknown): PushDelivery {
  if (!isRecord(body) || !isRecord(body.message))
    throw new PushDeliveryError("expected {message, subscription}");
  const { message } = body;
  const messageId = message.messageId ?? message.message_id;
  if (typeof messageId !== "string") throw new PushDeliveryError("message.messageId is missing");
  if (typeof message.data !== "string") throw new PushDeliveryError("message.data is missing");
  let data: string;
  try {
    const binary = atob(message.data);
    data = new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  } catch {
    throw new PushDeliveryError("message.data is not base64 of UTF-8 text");
  }
  return { messageId, data };
}

/** A push body carrying `data` (JSON-encoded first), as Pub/Sub posts it. For tests and fixtures. */
export function pushBodyOf(
  data: unknown,
  messageId: string,
  subscription: string,
  publishTime = new Date().toISOString(),
): Record<string, unknown> {
  const bytes = new TextEncoder().encode(JSON.stringify(data));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return {
    message: {
      attributes: { "logging.googleapis.com/timestamp": publishTime },
      data: btoa(binary),
      messageId,
      message_id: messageId,
      publishTime,
      publish_time: publishTime,
    },
    subscription,
  };
}
