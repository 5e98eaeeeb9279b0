/**
 * The Lambda handler invoked by a CloudWatch Logs subscription on an EKS cluster's audit log
 * (test/fixtures/eks: real devcluster audit events in the documented `awslogs.data` shape),
 * against the registry the platforms run: the same requests as the audit webhook's EventList of
 * the same events, sent on through PutEvents; undecodable and control deliveries do no work and
 * do not throw (a retry cannot help); a failed enqueue throws (Lambda retries the invoke).
 */
import { readFileSync } from "node:fs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createOperators } from "../../shared/app/operators.ts";
import { encodeCloudWatchLogs } from "../../shared/audit-export/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { ENVELOPE_VERSION } from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { createHandler } from "./handler.ts";

const eks = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/eks/${name}`, import.meta.url), "utf8")) as Record<
    string,
    unknown
  >;
const NS = "audit-fixtures";
const ENV = {
  AWS_REGION: "us-east-1",
  QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
  KUBECONFIG_BASE64: Buffer.from(
    "apiVersion: v1\nkind: Config\nclusters: [{ name: c, cluster: { server: 'https://203.0.113.10:6443' } }]\nusers: [{ name: u, user: { token: t } }]\ncontexts: [{ name: c, context: { cluster: c, user: u } }]\ncurrent-context: c\n",
  ).toString("base64"),
  AUDIT_TOKEN: "test-audit-token-0123456789",
};
const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
  memoryLimitInMB: "512",
  awsRequestId: "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "2026/11/30/[$LATEST]0123456789abcdef0123456789abcdef",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };

// EventBridge is moto's server; the template's Reconcile rule routes bus events to a queue.
let moto: Moto;
let aws: KubefnAws;
beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
}, 30_000);
afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await moto?.close();
});
afterEach(async () => {
  await aws.delivered();
});

function handlerFor(env: Record<string, string> = ENV) {
  const kube = new FakeKube();
  kube.seed(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: NS, name: "p1", uid: "uid-p1" },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { secretRef: { name: "ci" } } },
  });
  return createHandler({
    env,
    endpoint: moto.endpoint,
    kube: () => kube,
    operators: () =>
      createOperators({
        prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
        sweepPeriodSeconds: 60,
      }),
    log: silent,
    metrics: noMetrics,
  });
}

describe("CloudWatch Logs subscription → the Lambda handler", () => {
  it("a batch of EKS audit log events → the same requests as the audit webhook's EventList of those events", async () => {
    const decoded = eks("subscription-batch.decoded.json") as { logEvents: Array<{ message: string }> };
    const items = decoded.logEvents.flatMap((e) => {
      try {
        return [JSON.parse(e.message)];
      } catch {
        return [];
      }
    });
    const webhook = (await handlerFor()(
      {
        version: "2.0",
        routeKey: "$default",
        rawPath: "/v1/events",
        rawQueryString: "",
        headers: { "content-type": "application/json", authorization: `Bearer ${ENV.AUDIT_TOKEN}` },
        requestContext: { http: { method: "POST", path: "/v1/events", sourceIp: "198.51.100.20" } },
        body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items }),
        isBase64Encoded: false,
      },
      lambdaContext,
    )) as { statusCode: number; body: string };
    expect(webhook.statusCode).toBe(202);
    const viaWebhook = JSON.parse(webhook.body).requests;
    expect(viaWebhook).toEqual([{ controller: "proxy", namespace: NS, name: "p1" }]);
    await aws.delivered();

    const out = await handlerFor()(eks("subscription-batch.json"), lambdaContext);
    expect(out).toMatchObject({
      enqueued: 1,
      requests: viaWebhook,
      // 7 audit events and one log line that is not one
      counts: { events: 8, skipped: 1, dropped: 3 },
    });
    expect(await aws.deliveredMessages()).toEqual([
      {
        v: ENVELOPE_VERSION,
        cluster: "default",
        traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
        request: viaWebhook[0],
        attempt: 0,
        trigger: { kind: "audit" },
      },
    ]);
  });

  it.each([
    ["a CONTROL_MESSAGE", "control-message.json", "ControlMessage"],
    ["data that is not gzip", "not-gzip.json", "Undecodable"],
  ])("%s → answered without work and without a throw (no retry can help)", async (_what, file, reason) => {
    const out = await handlerFor()(eks(file), lambdaContext);
    expect(out).toMatchObject({ enqueued: 0, acknowledged: reason });
    expect(await aws.delivered()).toEqual([]);
  });

  it("a delivery with only irrelevant events sends nothing", async () => {
    const data = await encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      logGroup: "/aws/eks/prod/cluster",
      logEvents: [
        {
          id: "1",
          timestamp: 1,
          message: JSON.stringify({
            kind: "Event",
            stage: "ResponseComplete",
            verb: "get",
            objectRef: { resource: "proxies" },
          }),
        },
      ],
    });
    expect(await handlerFor()({ awslogs: { data } }, lambdaContext)).toMatchObject({
      enqueued: 0,
    });
    expect(await aws.delivered()).toEqual([]);
  });

  it("a queue that fails (a queue that does not exist) → the handler throws, so Lambda retries the invoke", async () => {
    const handler = handlerFor({
      ...ENV,
      QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/deleted-queue",
    });
    await expect(handler(eks("subscription-batch.json"), lambdaContext)).rejects.toThrow(/does not exist/);
    expect(await aws.delivered()).toEqual([]);
  });
});
