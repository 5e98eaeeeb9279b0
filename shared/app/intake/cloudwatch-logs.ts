import { auditItemsOf, CloudWatchLogsDecodeError, decodeCloudWatchLogs } from "../../audit-export/index.ts";
import type { Log, Metrics, PassMessage, Request } from "../../runtime/index.ts";
import type { BatchSource, MappedBatch } from "./app.ts";

export interface CloudWatchLogsIntake {
  map(source: BatchSource, batch: unknown): Promise<MappedBatch>;
  enqueue(messages: PassMessage[]): Promise<void>;
  log: Log;
  metrics: Metrics;
  /** Cap on the decompressed delivery. */
  maxBytes: number;
}

/** What one subscription delivery became. */
export type CloudWatchLogsResult =
  | { enqueued: number; requests: Request[]; counts: Record<string, number> }
  | {
      enqueued: 0;
      /** `UnknownLogGroup`: a fleet's delivery from the log group of no declared cluster. */
      acknowledged: "ControlMessage" | "Undecodable" | "UnknownLogGroup";
      detail: string;
    };

/**
 * One CloudWatch Logs subscription delivery (EKS audit log events) through the audit mapping:
 * decode `awslogs.data`, read each log event's message as an audit Event, map the batch exactly
 * as an audit webhook `EventList`, enqueue the requests.
 *
 * CloudWatch Logs invokes asynchronously: a throw makes Lambda retry the delivery (then its
 * dead-letter queue), so only a failed enqueue throws. A delivery that cannot be decoded, and a
 * `CONTROL_MESSAGE`, are answered without work; malformed log events inside a good delivery are
 * skipped and counted.
 *
 * @example
 * if (isCloudWatchLogsEvent(event)) return intakeCloudWatchLogs(event.awslogs.data, { map, enqueue, log, metrics, maxBytes });
 */
export async function intakeCloudWatchLogs(
  data: string,
  deps: CloudWatchLogsIntake,
): Promise<CloudWatchLogsResult> {
  let decoded: Awaited<ReturnType<typeof decodeCloudWatchLogs>>;
  try {
    decoded = await decodeCloudWatchLogs(data, deps.maxBytes);
  } catch (err) {
    if (!(err instanceof CloudWatchLogsDecodeError)) throw err;
    deps.metrics.count("kubefn_intake_rejected_total", { reason: "Undecodable" });
    deps.log.error("CloudWatch Logs delivery could not be decoded; dropped", { error: err.message });
    return { enqueued: 0, acknowledged: "Undecodable", detail: err.message };
  }
  if (decoded.messageType === "CONTROL_MESSAGE") {
    return { enqueued: 0, acknowledged: "ControlMessage", detail: decoded.logGroup };
  }
  const mapped = await deps.map("audit", {
    kind: "EventList",
    apiVersion: "audit.k8s.io/v1",
    items: auditItemsOf(decoded),
  });
  if (mapped.messages.length > 0) await deps.enqueue(mapped.messages);
  deps.metrics.count("kubefn_intake_batches_total", { source: "cloudwatch-logs" });
  deps.metrics.count("kubefn_intake_requests_total", { source: "cloudwatch-logs" }, mapped.messages.length);
  return {
    enqueued: mapped.messages.length,
    requests: mapped.messages.map((m) => m.request),
    counts: mapped.counts,
  };
}
