/**
 * The AWS Lambda entry (infra/aws/template.yaml `Handler: handler.handler`): one function for
 * every event source, told apart by a type guard per shape, each mapped onto one call of
 * {@link createKubefn}:
 *
 * | event | from | calls |
 * | --- | --- | --- |
 * | API Gateway v2 / Function URL (`requestContext.http`), API Gateway v1 (`httpMethod`) | intake callers | `fetch` (through `hono/aws-lambda`) |
 * | `source: "kubefn"`, `detail-type: "kubefn.reconcile"` | the bus's rule, or a one-time schedule's input | `consume` per message |
 * | `source: "aws.events"`, `detail-type: "Scheduled Event"` | the sweep's schedule rule | `sweep` |
 * | `awslogs.data` | a CloudWatch Logs subscription on an EKS cluster's audit log | `intakeCloudWatchLogs` |
 *
 * Anything else throws. Wiring is built once per execution environment, at the first invoke
 * (delayed follow-ups target the invoked function's ARN): the kubeconfig and GCE key are read then
 * from Secrets Manager by ARN ({@link resolveSecretEnv}) and kept for the process; a failed build
 * is retried at the next invoke.
 */
import { handle, type LambdaContext } from "hono/aws-lambda";
import { Hono } from "hono/tiny";
import { isCloudWatchLogsEvent } from "../../shared/audit-export/index.ts";
import { guardedKube, type Kube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Clock, Log, Metrics } from "../../shared/runtime/index.ts";
import { deliverCloudWatchLogs } from "../intake/index.ts";
import { createKubefn, type Kubefn } from "../kubefn.ts";
import type { Operators } from "../operators.ts";
import { createNodeProber } from "../ports/index.ts";
import { createJsonLog } from "../telemetry/index.ts";
import { type AwsConfig, parseAwsEnv } from "./config.ts";
import { describeEvent, isHttpEvent, isScheduledEvent } from "./events.ts";
import { awsQueueFor, consumeReconcileEvent, isReconcileEvent } from "./queue.ts";
import { resolveSecretEnv } from "./secrets.ts";
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
  metrics?: Metrics;
}

/** Builds a Lambda handler; `handler` below is the one deployed. */
export function createHandler(options: HandlerOptions) {
  let instance: Promise<{ kubefn: Kubefn; config: AwsConfig; http: ReturnType<typeof handle> }> | undefined;
  return async (event: unknown, context: LambdaContext): Promise<unknown> => {
    instance ??= build(options, context.invokedFunctionArn).catch((err: unknown) => {
      instance = undefined;
      throw err;
    });
    const { kubefn, config, http } = await instance;
    if (isHttpEvent(event)) return http(event, context);
    if (isCloudWatchLogsEvent(event)) return deliverCloudWatchLogs(kubefn, event.awslogs.data, config);
    if (isReconcileEvent(event)) {
      const { consume, ctx } = kubefn;
      return consumeReconcileEvent(event.detail.messages, consume, ctx.log, config.passConcurrency);
    }
    if (isScheduledEvent(event)) return kubefn.sweep();
    throw new Error(
      `unrecognised Lambda event (${describeEvent(event)}); expected an HTTP, kubefn.reconcile, Scheduled Event or CloudWatch Logs event`,
    );
  };
}

async function build(options: HandlerOptions, invokedFunctionArn: string) {
  const config = parseAwsEnv(await resolveSecretEnv(options.env, { endpoint: options.endpoint }));
  const clock = options.clock ?? { now: () => new Date() };
  const kubePorts = options.kube
    ? { kube: options.kube(config) }
    : guardedKube(
        createNodeTransport(loadKubeConfig(config.kubeconfig), { timeoutMs: config.kubeTimeoutMs }),
        config,
      );
  const kubefn = createKubefn(
    config,
    {
      kube: kubePorts.kube,
      ...("invocationKube" in kubePorts ? { invocationKube: kubePorts.invocationKube } : {}),
      queue: awsQueueFor(config, { targetArn: invokedFunctionArn, clock, endpoint: options.endpoint }),
      prober: createNodeProber(),
      clock,
      log: options.log ?? createJsonLog(),
      metrics: options.metrics ?? createEmfMetrics(),
    },
    options.operators?.(config),
  );
  const app = new Hono().all("*", (c) => kubefn.fetch(c.req.raw));
  return { kubefn, config, http: handle(app) };
}

export const handler = createHandler({ env: process.env });
