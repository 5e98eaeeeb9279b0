import type { LambdaEvent } from "hono/aws-lambda";
import { isRecord } from "../../shared/guards/index.ts";

/** The default bus's schedule rule (the sweep): `source: "aws.events"`, `detail-type: "Scheduled Event"`. */
export interface ScheduledEvent {
  source: "aws.events";
  "detail-type": "Scheduled Event";
  time: string;
  resources: string[];
}

/** API Gateway v2 and Function URL (`requestContext.http`), or API Gateway v1 (`httpMethod`). */
export function isHttpEvent(event: unknown): event is LambdaEvent {
  if (!isRecord(event) || !isRecord(event.requestContext)) return false;
  return (
    (isRecord(event.requestContext.http) && typeof event.rawPath === "string") ||
    typeof event.httpMethod === "string"
  );
}

export function isScheduledEvent(event: unknown): event is ScheduledEvent {
  return isRecord(event) && event.source === "aws.events" && event["detail-type"] === "Scheduled Event";
}

/** A short description of an event no guard accepted, for the error. */
export function describeEvent(event: unknown): string {
  if (!isRecord(event)) return typeof event;
  const hint = ["source", "detail-type", "eventSource"]
    .filter((k) => typeof event[k] === "string")
    .map((k) => `${k}=${event[k] as string}`);
  return hint.length > 0 ? hint.join(" ") : `keys ${Object.keys(event).slice(0, 8).join(",")}`;
}
