/**
 * CloudWatch Logs subscription deliveries (`{ awslogs: { data } }`), as a subscription filter on
 * an EKS cluster's `/aws/eks/<cluster>/cluster` log group invokes a Lambda function with them.
 * `data` is base64 of the gzip of a JSON document:
 *
 * ```json
 * { "messageType": "DATA_MESSAGE", "owner": "111122223333", "logGroup": "/aws/eks/prod/cluster",
 *   "logStream": "kube-apiserver-audit-…", "subscriptionFilters": ["kubefn"],
 *   "logEvents": [{ "id": "…", "timestamp": 1764504000000, "message": "<one audit.k8s.io/v1 Event as JSON>" }] }
 * ```
 *
 * `CONTROL_MESSAGE` deliveries are CloudWatch Logs checking that the destination is reachable;
 * they carry no log events.
 */

import { readTextCapped } from "../streams/index.ts";

/** A subscription delivery, decoded. Only the fields intake reads are typed. */
export interface CloudWatchLogsData {
  messageType: "DATA_MESSAGE" | "CONTROL_MESSAGE";
  logGroup: string;
  logStream?: string;
  logEvents: Array<{ id: string; timestamp: number; message: string }>;
}

/** The delivery cannot be read at all (bad base64, not gzip, not the documented JSON). No retry helps. */
export class CloudWatchLogsDecodeError extends Error {
  override readonly name = "CloudWatchLogsDecodeError";
}

/** Whether a Lambda event is a CloudWatch Logs subscription delivery. */
export function isCloudWatchLogsEvent(event: unknown): event is { awslogs: { data: string } } {
  return (
    typeof event === "object" &&
    event !== null &&
    typeof (event as { awslogs?: unknown }).awslogs === "object" &&
    (event as { awslogs: unknown }).awslogs !== null &&
    typeof (event as { awslogs: { data?: unknown } }).awslogs.data === "string"
  );
}

/**
 * Decodes `awslogs.data`: base64 → gunzip (Web-standard `DecompressionStream`, so it runs on
 * every platform) → JSON, capped at `maxBytes` decompressed.
 *
 * Caveats: a log event whose `message` is not an audit Event is not an error here; the mapping
 * skips and counts it.
 *
 * @throws CloudWatchLogsDecodeError naming what is wrong.
 */
export async function decodeCloudWatchLogs(data: string, maxBytes: number): Promise<CloudWatchLogsData> {
  let compressed: Uint8Array<ArrayBuffer>;
  try {
    compressed = base64Bytes(data);
  } catch {
    throw new CloudWatchLogsDecodeError("awslogs.data is not base64");
  }
  let text: string;
  try {
    text = await gunzipText(compressed, maxBytes);
  } catch (err) {
    if (err instanceof CloudWatchLogsDecodeError) throw err;
    throw new CloudWatchLogsDecodeError(`awslogs.data is not gzip: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CloudWatchLogsDecodeError("awslogs.data does not hold JSON");
  }
  return checkData(parsed);
}

function checkData(value: unknown): CloudWatchLogsData {
  if (typeof value !== "object" || value === null) {
    throw new CloudWatchLogsDecodeError("awslogs.data does not hold a JSON object");
  }
  const { messageType, logGroup, logStream, logEvents } = value as Record<string, unknown>;
  if (messageType !== "DATA_MESSAGE" && messageType !== "CONTROL_MESSAGE") {
    throw new CloudWatchLogsDecodeError(
      `messageType must be DATA_MESSAGE or CONTROL_MESSAGE, got ${JSON.stringify(messageType ?? null)}`,
    );
  }
  if (typeof logGroup !== "string") throw new CloudWatchLogsDecodeError("logGroup must be a string");
  if (!Array.isArray(logEvents)) throw new CloudWatchLogsDecodeError("logEvents must be an array");
  const events: CloudWatchLogsData["logEvents"] = [];
  for (const e of logEvents) {
    // A malformed log event is kept with an empty message: the mapping skips and counts it.
    const r = typeof e === "object" && e !== null ? (e as Record<string, unknown>) : {};
    events.push({
      id: typeof r.id === "string" ? r.id : "",
      timestamp: typeof r.timestamp === "number" ? r.timestamp : 0,
      message: typeof r.message === "string" ? r.message : "",
    });
  }
  return {
    messageType,
    logGroup,
    ...(typeof logStream === "string" ? { logStream } : {}),
    logEvents: events,
  };
}

/**
 * The log events' messages as audit events, for the audit mapping: each message parsed as JSON;
 * one that is not JSON stays a string, which the mapping counts as skipped.
 */
export function auditItemsOf(data: CloudWatchLogsData): unknown[] {
  return data.logEvents.map((e) => {
    try {
      return JSON.parse(e.message) as unknown;
    } catch {
      return e.message;
    }
  });
}

/**
 * Encodes a delivery as CloudWatch Logs does (gzip, base64). For tests and fixtures; the platform
 * does this in production.
 */
export async function encodeCloudWatchLogs(data: unknown): Promise<string> {
  const stream = new Blob([JSON.stringify(data)]).stream().pipeThrough(new CompressionStream("gzip"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function base64Bytes(data: string): Uint8Array<ArrayBuffer> {
  const binary = atob(data);
  const out = new Uint8Array(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

async function gunzipText(bytes: Uint8Array<ArrayBuffer>, maxBytes: number): Promise<string> {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const text = await readTextCapped(stream, maxBytes);
  if (text === undefined) {
    throw new CloudWatchLogsDecodeError(`awslogs.data decompresses to more than ${maxBytes} bytes`);
  }
  return text;
}
