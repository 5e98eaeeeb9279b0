/**
 * The AWS Lambda entry (infra/aws/template.yaml `Handler: handler.handler`): every event source,
 * told apart by shape (the table is in docs/deploying/aws.md), onto one call of {@link createKubefn};
 * anything else throws. Built at the first invoke (the kubeconfig and GCE key read then from Secrets Manager by ARN,
 * or on EKS no kubeconfig: tokens minted from the function's role, ./eks-token.ts; a failed build is retried). Follow-ups and fan-out go to the reconcile queue (SQS), whose batches
 * come back here; the previous release's EventBridge events are still consumed (./eventbridge.ts).
 * The intake's token and relay secret are re-read after a refused request (at most once a minute,
 * ./secrets.ts); the invocation's metrics are written at its end, also when it failed
 * (./telemetry.ts).
 */
import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import { Hono } from "hono/tiny";
import type { Operators } from "../../shared/app/index.ts";
import { createJsonLog, createKubefn } from "../../shared/app/index.ts";
import { isCloudWatchLogsEvent } from "../../shared/audit-export/index.ts";
import { onceUntilFailure } from "../../shared/concurrency/index.ts";
import { describeShape, isRecord } from "../../shared/guards/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { Kube } from "../../shared/kube/index.ts";
import type { Clock, Log, Metrics } from "../../shared/runtime/index.ts";
import { clusterKube } from "./cluster.ts";
import { type AwsConfig, parseAwsEnv } from "./config.ts";
import { consumeReconcileEvent, isReconcileEvent, isScheduledEvent } from "./eventbridge.ts";
import { answeringAgainAfterRotation } from "./intake-credentials.ts";
import { consumeSqsEvent, isSqsEvent, sqsQueue, sqsQueueOptionsFor } from "./queue.ts";
import { resolveSecretEnv, rotatingIntakeCredentials } from "./secrets.ts";
import { createEmfMetrics } from "./telemetry.ts";

/** What the handler is built from; everything but `env` has a production default. */
export interface HandlerOptions {
  env: Record<string, string | undefined>;
  /** AWS endpoint for every SDK client (tests point it at a local server). */
  endpoint?: string;
  kube?: (config: AwsConfig) => Kube;
  operators?: (config: AwsConfig) => Operators;
  clock?: Clock;
  log?: Log;
  /** Flushed at the end of every invocation when it has `flush` (the default EMF metrics do). */
  metrics?: Metrics & { flush?(): unknown };
}

/** Builds a Lambda handler; `handler` below is the one deployed. */
export function createHandler(options: HandlerOptions) {
  const metrics = options.metrics ?? createEmfMetrics();
  const instance = onceUntilFailure(() => build({ ...options, metrics }));
  const dispatch = async (event: unknown, context: LambdaContext): Promise<unknown> => {
    const { kubefn, http, sqs } = await instance();
    if (isHttpEvent(event)) return http(event, context);
    if (isSqsEvent(event)) return consumeSqsEvent(event, kubefn, sqs);
    if (isCloudWatchLogsEvent(event))
      return kubefn.ingest({ source: "cloudwatch-logs", data: event.awslogs.data });
    if (isReconcileEvent(event)) return consumeReconcileEvent(event, kubefn);
    if (isScheduledEvent(event)) return kubefn.sweep();
    throw new Error(
      `unrecognised Lambda event (${describeShape(event, ["source", "detail-type", "eventSource"])}); expected an HTTP, SQS, kubefn.reconcile, Scheduled Event or CloudWatch Logs event`,
    );
  };
  return async (event: unknown, context: LambdaContext): Promise<unknown> => {
    try {
      return await dispatch(event, context);
    } finally {
      metrics.flush?.();
    }
  };
}

async function build(options: HandlerOptions) {
  const config = parseAwsEnv(await resolveSecretEnv(options.env, { endpoint: options.endpoint }));
  const clock = options.clock ?? { now: () => new Date() };
  const log = options.log ?? createJsonLog(config.logLevel);
  const sqs = sqsQueueOptionsFor(config, { clock, endpoint: options.endpoint });
  const credentials = rotatingIntakeCredentials(options.env, config, {
    endpoint: options.endpoint,
    now: () => clock.now().getTime(),
    log,
  });
  const kubefn = createKubefn(
    config,
    {
      ...(options.kube ? { kube: options.kube(config) } : clusterKube(config, { env: options.env, clock })),
      queue: sqsQueue(sqs),
      prober: createNodeProber(),
      clock,
      log,
      metrics: options.metrics ?? createEmfMetrics(),
      intakeCredentials: credentials.current,
    },
    options.operators?.(config),
  );
  return {
    kubefn,
    http: answeringAgainAfterRotation(
      handle(new Hono().all("*", (c) => kubefn.fetch(c.req.raw))),
      credentials,
    ),
    sqs: { ...sqs, log },
  };
}

/** API Gateway v2 and Function URL (`requestContext.http`), or API Gateway v1 (`httpMethod`). */
function isHttpEvent(e: unknown): e is LambdaEvent {
  if (!isRecord(e) || !isRecord(e.requestContext)) return false;
  const { requestContext: rc } = e;
  return (isRecord(rc.http) && typeof e.rawPath === "string") || typeof e.httpMethod === "string";
}

export const handler = createHandler({ env: process.env });
