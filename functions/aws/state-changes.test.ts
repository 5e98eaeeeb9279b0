/**
 * kubefn's state changes on EventBridge, against moto's server: PutEvents on the bus the user
 * names, a real rule on that bus routing to an SQS queue the test reads (and a second rule that
 * pages only on `Proxy Unhealthy`, as docs/monitoring.md shows), each listed change arriving with
 * its documented `source`/`detail-type`/`detail`. Through the production handler, a pass publishes
 * only when its status write changed a condition, and a closed admission gate says so once.
 */
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  DeleteRuleCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { proxyStateChanges } from "../../shared/controllers/proxy/state-changes.ts";
import { createRegistry, done, type StateChange, StateChangeType } from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { condition, everyChange, NOW } from "../../test/support/state-changes.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { createHandler } from "./handler.ts";
import type { SqsEvent } from "./queue.ts";
import { eventBridgeStateChanges, MAX_PUT_EVENTS_ENTRIES } from "./state-changes.ts";

const BUS = "kubefn-changes";
const KUBECONFIG_BASE64 = Buffer.from("unused: the kube port is given").toString("base64");
const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
  memoryLimitInMB: "512",
  awsRequestId: "state-changes",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "state-changes",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };

let moto: Moto;
let aws: KubefnAws;
let events: EventBridgeClient;
let sqs: SQSClient;
let routedUrl: string;
let pagerUrl: string;
let putEventsCalls = 0;

interface Routed {
  source: string;
  "detail-type": string;
  detail: StateChange["detail"];
}

async function queueWithArn(name: string): Promise<{ url: string; arn: string }> {
  const url = (await sqs.send(new CreateQueueCommand({ QueueName: name }))).QueueUrl as string;
  const attrs = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
  );
  return { url, arn: attrs.Attributes?.QueueArn as string };
}

async function rule(name: string, pattern: object, targetArn: string): Promise<void> {
  await events.send(
    new PutRuleCommand({ Name: name, EventBusName: BUS, EventPattern: JSON.stringify(pattern) }),
  );
  await events.send(
    new PutTargetsCommand({ Rule: name, EventBusName: BUS, Targets: [{ Id: "queue", Arn: targetArn }] }),
  );
}

/** Every event the rule delivered to `url` so far, taken off the queue. */
async function routed(url: string): Promise<Routed[]> {
  const out: Routed[] = [];
  for (;;) {
    const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }));
    const messages = got.Messages ?? [];
    if (messages.length === 0) return out;
    out.push(...messages.map((m) => JSON.parse(m.Body as string) as Routed));
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle as string })),
      }),
    );
  }
}

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
  events = new EventBridgeClient({ region: REGION, endpoint: moto.endpoint });
  events.middlewareStack.add(
    (next) => async (args) => {
      if ((args.input as { Entries?: unknown }).Entries) putEventsCalls++;
      return next(args);
    },
    { step: "initialize" },
  );
  sqs = new SQSClient({ region: REGION, endpoint: moto.endpoint });
  await events.send(new CreateEventBusCommand({ Name: BUS }));
  const all = await queueWithArn("kubefn-routed");
  const pager = await queueWithArn("kubefn-pager");
  routedUrl = all.url;
  pagerUrl = pager.url;
  await rule("kubefn-all", { source: ["kubefn"] }, all.arn);
  // docs/monitoring.md's rule: page on a Proxy gone Unhealthy.
  await rule("kubefn-page-unhealthy", { source: ["kubefn"], "detail-type": ["Proxy Unhealthy"] }, pager.arn);
});

afterAll(async () => {
  for (const name of ["kubefn-all", "kubefn-page-unhealthy"]) {
    await events.send(new RemoveTargetsCommand({ Rule: name, EventBusName: BUS, Ids: ["queue"] }));
    await events.send(new DeleteRuleCommand({ Name: name, EventBusName: BUS }));
  }
  await events.send(new DeleteEventBusCommand({ Name: BUS }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: routedUrl }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: pagerUrl }));
  events.destroy();
  sqs.destroy();
  aws.close();
  await moto.close();
  vi.unstubAllEnvs();
});

describe("EventBridge: kubefn's state changes through a rule", () => {
  it("each listed change arrives on the rule's queue with source kubefn, its detail-type and a versioned detail", async () => {
    const changes = everyChange();
    expect(changes.map((c) => c.type).sort()).toEqual(Object.values(StateChangeType).sort());
    await eventBridgeStateChanges({ client: events, busName: BUS }).publish(changes);

    const got = await routed(routedUrl);
    expect(got.map((e) => e["detail-type"]).sort()).toEqual(Object.values(StateChangeType).sort());
    for (const e of got) {
      expect(e.source).toBe("kubefn");
      expect(e.detail.version).toBe("1");
    }
    const replaced = got.find((e) => e["detail-type"] === "Proxy Instance Replaced");
    expect(replaced?.detail.instance).toEqual({ replaced: "i-0old" });
    const refused = got.find((e) => e["detail-type"] === "SubPool Refused");
    expect(refused?.detail.object).toMatchObject({ kind: "SubPool", name: "subpool-1" });
    expect(refused?.detail.condition).toMatchObject({
      type: "Ready",
      status: "False",
      reason: "NamespaceConflict",
      previous: { status: "Unknown", reason: "Pending" },
    });
    const site = got.find((e) => e["detail-type"] === "Site Component Changed");
    expect(site?.detail.condition).toMatchObject({ type: "IngressReady", status: "False" });
    const gate = got.find((e) => e["detail-type"] === "Admission Gate Closed");
    expect(gate?.detail.admission?.problems).toHaveLength(1);

    // The paging rule took only the Unhealthy one.
    const paged = await routed(pagerUrl);
    expect(paged.map((e) => e["detail-type"])).toEqual(["Proxy Unhealthy"]);
    expect(paged[0]?.detail.object).toMatchObject({ kind: "Proxy", namespace: "ns1", name: "proxy-1" });
  });

  it(`PutEvents carries at most ${MAX_PUT_EVENTS_ENTRIES} entries per call`, async () => {
    const one = everyChange()[1] as StateChange;
    putEventsCalls = 0;
    await eventBridgeStateChanges({ client: events, busName: BUS }).publish(
      Array.from({ length: 23 }, () => one),
    );
    expect(putEventsCalls).toBe(3);
    expect(await routed(routedUrl)).toHaveLength(23);
    expect(await routed(pagerUrl)).toHaveLength(23);
  });
});

describe("the Lambda handler publishes what its passes change, on STATE_CHANGES_BUS", () => {
  const handlerWith = (kube: FakeKube) =>
    createHandler({
      env: { AWS_REGION: REGION, KUBECONFIG_BASE64, STATE_CHANGES_BUS: BUS, ...aws.env },
      endpoint: moto.endpoint,
      kube: () => kube,
      operators: () => ({
        registry: createRegistry([
          proxyController({
            // Like the proxy controller: the health verdict turns False, then stays so.
            async reconcile(_ctx, proxy) {
              proxy.status = { conditions: [condition("Healthy", "False", "ProbeFailed")] };
              return done();
            },
            stateChanges: proxyStateChanges,
          }),
        ]),
        sweepTasks: [],
      }),
      clock: { now: () => NOW },
      log: silent,
      metrics: noMetrics,
    });
  const pass = async (handler: ReturnType<typeof createHandler>) => {
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: aws.queueUrl,
        MessageBody: JSON.stringify({
          request: { controller: "proxy", namespace: "ns1", name: "p1" },
          attempt: 0,
        }),
      }),
    );
    const got = await aws.poll((e: SqsEvent) => handler(e, lambdaContext) as Promise<unknown>, 2);
    expect(got?.failed).toEqual([]);
  };

  it("a pass whose write turns Healthy False publishes Proxy Unhealthy once; the next pass, changing nothing, publishes nothing", async () => {
    const kube = new FakeKube(() => NOW);
    kube.seed(ProxyResource, {
      apiVersion: "example.kubefn.dev/v1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
      status: { conditions: [condition("Healthy", "True", "ProbeSucceeded")] },
    });
    const handler = handlerWith(kube);
    await pass(handler);
    const first = await routed(routedUrl);
    expect(first.map((e) => e["detail-type"])).toEqual(["Proxy Unhealthy"]);
    expect(first[0]?.detail.condition?.previous).toEqual({ status: "True", reason: "ProbeSucceeded" });

    await pass(handler);
    expect(await routed(routedUrl)).toEqual([]);
    expect((await routed(pagerUrl)).map((e) => e["detail-type"])).toEqual(["Proxy Unhealthy"]);
  });

  it("a closed admission gate publishes Admission Gate Closed once, however many passes wait", async () => {
    const handler = handlerWith(new FakeKube(() => NOW, { admissionPolicies: false }));
    await pass(handler);
    await pass(handler);
    const got = await routed(routedUrl);
    expect(got.map((e) => e["detail-type"])).toEqual(["Admission Gate Closed"]);
    expect(got[0]?.detail.admission?.problems.length).toBeGreaterThan(0);
  });
});
