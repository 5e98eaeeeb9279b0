/**
 * The AWS Lambda entries: every event source, told apart by shape (the table is in
 * docs/deploying/aws.md), onto one call of {@link createKubefn}. infra/aws/template.yaml deploys
 * two functions from this one bundle, so that a flood of requests to the public Function URL
 * cannot take the instances the control loop runs on: `intake` (the Function URL only; its own
 * reserved concurrency, no SQS event source, no GCE key) and `reconcile` (the reconcile queue, the
 * sweep rule, the EKS audit log; no URL, no intake secrets). `handler` takes every event (local
 * runs, and a single-function template). An event the function is not for throws before anything
 * is built. Built at the first invoke (the kubeconfig and GCE key read then from Secrets Manager
 * by ARN, or on EKS no kubeconfig: tokens minted from the function's role, ./eks-token.ts; a
 * failed build is retried). Follow-ups and fan-out go to the reconcile queue (SQS); the
 * previous release's EventBridge events are still consumed (./eventbridge.ts). The intake's token
 * and relay secret are re-read after a refused request (at most once a minute, ./secrets.ts); the
 * invocation's metrics are written at its end, also when it failed (./telemetry.ts). With
 * `KUBEFN_CLUSTERS` (or `KUBEFN_CLUSTERS_SECRET_ARN`) it builds one kubefn per declared cluster
 * behind `dispatchByCluster`, which routes each event to its cluster.
 */
import { handle, type LambdaContext, type LambdaEvent } from "hono/aws-lambda";
import { Hono } from "hono/tiny";
import type {
  Clock,
  ClusterDeclaration,
  Kubefn,
  KubefnPorts,
  Log,
  Metrics,
  Operators,
} from "../../shared/app/index.ts";
import {
  clusterMember,
  createJsonLog,
  createKubefn,
  dispatchByCluster,
  type intakeCredentialsOf,
} from "../../shared/app/index.ts";
import { isCloudWatchLogsEvent } from "../../shared/audit-export/index.ts";
import { onceUntilFailure } from "../../shared/concurrency/index.ts";
import { assertNever, describeShape, isRecord } from "../../shared/guards/index.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { Kube } from "../../shared/kube/index.ts";
import { clusterKube, declaredClusterKube } from "./cluster.ts";
import { type AwsConfig, parseAwsEnv } from "./config.ts";
import {
  consumeReconcileEvent,
  isReconcileEvent,
  isScheduledEvent,
  type ReconcileEvent,
} from "./eventbridge.ts";
import { answeringAgainAfterRotation } from "./intake-credentials.ts";
import {
  consumeSqsEvent,
  forwardBodies,
  isSqsEvent,
  type SqsEvent,
  sqsQueue,
  sqsQueueOptionsFor,
} from "./queue.ts";
import { resolveSecretEnv, rotatingIntakeCredentials } from "./secrets.ts";
import { stateChangesFor } from "./state-changes.ts";
import { createEmfMetrics } from "./telemetry.ts";

/**
 * Which events a function takes. `intake`: HTTP only (and the previous release's
 * `kubefn.reconcile` schedules, which name this function: passed on to the queue, not run).
 * `reconcile`: SQS batches, the sweep, CloudWatch Logs deliveries, `kubefn.reconcile` events.
 * `all`: both.
 */
export type HandlerRole = "intake" | "reconcile" | "all";

/** What the handler is built from; everything but `env` has a production default. */
export interface HandlerOptions {
  env: Record<string, string | undefined>;
  /** `all` when unset. */
  role?: HandlerRole;
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
  const role = options.role ?? "all";
  const dispatch = async (event: unknown, context: LambdaContext): Promise<unknown> => {
    const route = routeOf(event, role);
    const { kubefn, http, sqs } = await instance();
    switch (route.kind) {
      case "http":
        return http(route.event, context);
      case "sqs":
        return consumeSqsEvent(route.event, kubefn, sqs);
      case "logs":
        return kubefn.ingest({ source: "cloudwatch-logs", data: route.event.awslogs.data });
      case "reconcile":
        return consumeReconcileEvent(route.event, kubefn);
      case "forward": {
        const { messages } = route.event.detail;
        await forwardBodies(sqs, messages);
        return { forwarded: messages.length };
      }
      case "sweep":
        // Planned from the schedule's minute (the event's `time`), not from this invocation's start.
        return kubefn.sweep(route.scheduledTime ? { scheduledTime: route.scheduledTime } : {});
      default:
        return assertNever(route);
    }
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
  const stateChanges = stateChangesFor(config, { endpoint: options.endpoint });
  const metrics = options.metrics ?? createEmfMetrics();
  const ports: Omit<KubefnPorts, "kube"> = {
    queue: sqsQueue(sqs),
    prober: createNodeProber(),
    clock,
    log,
    metrics,
    ...(stateChanges ? { stateChanges } : {}),
  };
  const kubefn = config.clusters
    ? dispatchByCluster(
        config.clusters.map((declared) => clusterKubefn(declared, config, ports, options)),
        { log, metrics, maxBodyBytes: config.maxBodyBytes },
      )
    : createKubefn(
        config,
        {
          ...(options.kube
            ? { kube: options.kube(config) }
            : clusterKube(config, { env: options.env, clock })),
          ...ports,
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

/**
 * One declared cluster's kubefn (`KUBEFN_CLUSTERS`): its own kube (circuit, request budget), admission
 * gate and intake credentials (read at cold start), `cluster` on its log lines and series; the
 * queue, prober and state changes are the function's. An EKS cluster's audit log deliveries are
 * its by their log group.
 */
function clusterKubefn(
  declared: ClusterDeclaration,
  config: AwsConfig,
  ports: Omit<KubefnPorts, "kube">,
  options: HandlerOptions,
): {
  cluster: string;
  kubefn: Kubefn;
  credentials: ReturnType<typeof intakeCredentialsOf>;
  logGroups: string[];
} {
  const clock = ports.clock ?? { now: () => new Date() };
  const member = clusterMember(
    declared,
    config,
    ports,
    (settings) =>
      options.kube
        ? { kube: options.kube({ ...config, ...settings }) }
        : declaredClusterKube(declared, settings, {
            env: options.env,
            clock,
            eksRenewAfterMs: config.eksRenewAfterMs,
          }),
    options.operators?.(config),
  );
  const { credential } = declared;
  return {
    ...member,
    logGroups: credential.kind === "eks" ? [`/aws/eks/${credential.clusterName}/cluster`] : [],
  };
}

/** An event with what its function does with it. */
type Route =
  | { kind: "http"; event: LambdaEvent }
  | { kind: "sqs"; event: SqsEvent }
  | { kind: "logs"; event: { awslogs: { data: string } } }
  | { kind: "reconcile" | "forward"; event: ReconcileEvent }
  | { kind: "sweep"; scheduledTime?: Date };

/**
 * What `role`'s function does with `event`.
 * @throws Error naming the event's shape when the function is not for it: an SQS batch delivered
 * to the intake (an event source mapping left on it) fails and comes back to the reconcile function.
 */
function routeOf(event: unknown, role: HandlerRole): Route {
  const intake = role !== "reconcile";
  const reconcile = role !== "intake";
  if (intake && isHttpEvent(event)) return { kind: "http", event };
  if (reconcile && isSqsEvent(event)) return { kind: "sqs", event };
  if (reconcile && isCloudWatchLogsEvent(event)) return { kind: "logs", event };
  if (isReconcileEvent(event)) return { kind: reconcile ? "reconcile" : "forward", event };
  if (reconcile && isScheduledEvent(event)) {
    const time = isRecord(event) && typeof event.time === "string" ? new Date(event.time) : undefined;
    return time && !Number.isNaN(time.getTime()) ? { kind: "sweep", scheduledTime: time } : { kind: "sweep" };
  }
  const expected = [
    ...(intake ? ["an HTTP"] : []),
    ...(reconcile ? ["an SQS", "a Scheduled Event", "a CloudWatch Logs"] : []),
    "a kubefn.reconcile",
  ];
  throw new Error(
    `unrecognised Lambda event (${describeShape(event, ["source", "detail-type", "eventSource"])}); the ${role === "all" ? "" : `${role} `}function expects ${expected.join(", ")} event`,
  );
}

/** API Gateway v2 and Function URL (`requestContext.http`), or API Gateway v1 (`httpMethod`). */
function isHttpEvent(e: unknown): e is LambdaEvent {
  if (!isRecord(e) || !isRecord(e.requestContext)) return false;
  const { requestContext: rc } = e;
  return (isRecord(rc.http) && typeof e.rawPath === "string") || typeof e.httpMethod === "string";
}

/** Every event source: local runs, and a template that deploys one function. */
export const handler = createHandler({ env: process.env });
/** infra/aws/template.yaml's `Kubefn` function: the public Function URL. */
export const intake = createHandler({ env: process.env, role: "intake" });
/** infra/aws/template.yaml's `KubefnReconcile` function: the queue, the sweep, the EKS audit log. */
export const reconcile = createHandler({ env: process.env, role: "reconcile" });
