import { readFileSync } from "node:fs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { SweepSummary } from "../../shared/app/sweep.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import type { ControllerDefinition } from "../../shared/runtime/controller.ts";
import { createRegistry, ENVELOPE_VERSION, requeueAfter } from "../../shared/runtime/index.ts";
import type { Resource } from "../../shared/runtime/types.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { createHandler } from "./handler.ts";
import { scheduleName } from "./queue.ts";

/** The fixtures carry real Proxy events (crawl.kubefn.dev); the test controller reconciles that kind. */
const ProxyKind: Resource = { ...ProxyResource, group: "crawl.kubefn.dev" };

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/aws/${name}`, import.meta.url), "utf8"));

const NOW = new Date("2026-11-30T12:00:00.000Z");
const FUNCTION_ARN = "arn:aws:lambda:us-east-1:111122223333:function:kubefn";
const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://203.0.113.10:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: c, context: { cluster: c, user: u } }]
current-context: c
`;
const ENV = {
  AWS_REGION: "us-east-1",
  EVENT_BUS_NAME: "kubefn",
  SCHEDULE_GROUP: "kubefn",
  SCHEDULER_ROLE_ARN: "arn:aws:iam::111122223333:role/kubefn-scheduler",
  KUBECONFIG_BASE64: Buffer.from(KUBECONFIG).toString("base64"),
  AUDIT_TOKEN: "test-audit-token-0123456789",
};
const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: FUNCTION_ARN,
  memoryLimitInMB: "512",
  awsRequestId: "4c9e5a8b-1d2f-4e3a-9b8c-7d6e5f4a3b2c",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "2026/11/30/[$LATEST]0123456789abcdef0123456789abcdef",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };

// EventBridge and Scheduler are moto's server: bus events reach a queue through the template's
// Reconcile rule; schedules are read back with GetSchedule.
let moto: Moto;
let aws: KubefnAws;
let kube: FakeKube;

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

beforeEach(async () => {
  kube = new FakeKube();
  for (const name of ["p1", "p2"]) {
    kube.seed(ProxyKind, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name, namespace: "ns1", uid: `uid-${name}`, generation: 1 },
      spec: {},
    });
  }
});
afterEach(async () => {
  await aws.delivered();
  await aws.fire();
});

function handlerWith(controller: Partial<ControllerDefinition> = {}) {
  return createHandler({
    env: ENV,
    endpoint: moto.endpoint,
    kube: () => kube,
    operators: () => ({
      registry: createRegistry([proxyController({ for: ProxyKind, ...controller })]),
      sweepTasks: [],
    }),
    clock: { now: () => NOW },
    log: silent,
    metrics: noMetrics,
  });
}

describe("HTTP events → the intake app", () => {
  it.each(["function-url-post-events.json", "function-url-post-events-base64.json"])(
    "%s: an audit EventList with the bearer token → 202 and a PutEvents carrying the request",
    async (name) => {
      const res = (await handlerWith()(fixture(name), lambdaContext)) as { statusCode: number; body: string };
      expect(res.statusCode).toBe(202);
      expect(JSON.parse(res.body)).toMatchObject({ source: "audit", enqueued: 1 });
      const events = await aws.delivered();
      expect(events).toHaveLength(1);
      // The audit event's stored object rides along as the pass's snapshot.
      expect(events.flatMap((e) => e.detail.messages)).toMatchObject([
        {
          request: { controller: "proxy", namespace: "ns1", name: "p1" },
          attempt: 0,
          trigger: { kind: "audit" },
          snapshot: { metadata: { name: "p1" } },
        },
      ]);
    },
  );

  it("rejects a Function URL request without the token with 401 and sends nothing", async () => {
    const event = fixture("function-url-post-events.json") as { headers: Record<string, string> };
    delete event.headers.authorization;
    const res = (await handlerWith()(event, lambdaContext)) as { statusCode: number };
    expect(res.statusCode).toBe(401);
    expect(await aws.delivered()).toEqual([]);
  });

  it("a Function URL GET / → the fleet page, the same as every platform's", async () => {
    const post = fixture("function-url-post-events.json") as Record<string, unknown> & {
      headers: Record<string, string>;
      requestContext: { http: Record<string, string> };
    };
    const { authorization: _, "content-length": __, ...headers } = post.headers;
    const get = {
      ...post,
      rawPath: "/",
      rawQueryString: "",
      queryStringParameters: undefined,
      headers: { ...headers, accept: "text/html" },
      requestContext: {
        ...post.requestContext,
        http: { ...post.requestContext.http, method: "GET", path: "/" },
      },
      body: undefined,
    };
    const res = (await handlerWith()(get, lambdaContext)) as {
      statusCode: number;
      headers: Record<string, string>;
      body: string;
    };
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-security-policy"]).toMatch(/^default-src 'none'/);
    expect(res.body).toContain("<tr><td>ns1/p1</td>");
  });

  it("API Gateway v1 GET /healthz → 200", async () => {
    const res = (await handlerWith()(fixture("apigw-v1-get-healthz.json"), lambdaContext)) as {
      statusCode: number;
      body: string;
    };
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: true });
  });
});

describe("kubefn.reconcile events → runPass", () => {
  it("an EventBridge envelope runs one pass per message; a requeue becomes an at() schedule targeting this function", async () => {
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        return requeueAfter(30);
      },
    });
    const out = await handler(fixture("eventbridge-reconcile.json"), lambdaContext);
    expect(out).toEqual({ passes: 2, skipped: 0 });
    expect(reconciled.sort()).toEqual(["p1", "p2"]);
    const schedules = await aws.schedules();
    expect(schedules).toHaveLength(2);
    const due = NOW.getTime() / 1000 + 30;
    expect(schedules.map((s) => s.name)).toEqual(
      ["p1", "p2"]
        .map((name) =>
          scheduleName([{ request: { controller: "proxy", namespace: "ns1", name }, attempt: 0 }], due),
        )
        .sort(),
    );
    for (const s of schedules) {
      expect(s.output).toMatchObject({
        ScheduleExpression: "at(2026-11-30T12:00:30)",
        ActionAfterCompletion: "DELETE",
        Target: { Arn: FUNCTION_ARN, RoleArn: ENV.SCHEDULER_ROLE_ARN },
      });
    }
    // When they run, Scheduler invokes the function with each input: the passes run again.
    reconciled.length = 0;
    for (const s of await aws.fire())
      expect(await handler(s.input, lambdaContext)).toEqual({ passes: 1, skipped: 0 });
    expect(reconciled.sort()).toEqual(["p1", "p2"]);
  });

  it("a schedule's input (the same fields, no envelope) is handled the same way", async () => {
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        return requeueAfter(0);
      },
    });
    expect(await handler(fixture("scheduler-reconcile-input.json"), lambdaContext)).toEqual({
      passes: 1,
      skipped: 0,
    });
    expect(reconciled).toEqual(["p2"]);
    // requeueAfter(0) goes straight back onto the bus
    expect(await aws.deliveredMessages()).toEqual([
      {
        v: ENVELOPE_VERSION,
        traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
        request: { controller: "proxy", namespace: "ns1", name: "p2" },
        attempt: 0,
        uid: "uid-p2",
        trigger: { kind: "follow-up" },
      },
    ]);
  });

  it("skips items that are not messages and runs the rest", async () => {
    const event = fixture("eventbridge-reconcile.json") as { detail: { messages: unknown[] } };
    event.detail.messages.push({ request: "nope" }, 42);
    expect(await handlerWith()(event, lambdaContext)).toEqual({ passes: 2, skipped: 2 });
  });

  it("throws when a pass crashes, so Lambda retries the invoke and then dead-letters it", async () => {
    const errors: string[] = [];
    const handler = createHandler({
      env: ENV,
      endpoint: moto.endpoint,
      kube: () => kube,
      operators: () => ({ registry: createRegistry([proxyController({ for: ProxyKind })]), sweepTasks: [] }),
      log: {
        ...silent,
        info() {
          throw new Error("stdout closed");
        },
        error: (msg) => errors.push(msg),
      },
      metrics: noMetrics,
    });
    await expect(handler(fixture("eventbridge-reconcile.json"), lambdaContext)).rejects.toThrow(
      "2 of 2 messages to redeliver",
    );
    expect(errors).toEqual(["pass crashed; redelivering", "pass crashed; redelivering"]);
  });
});

describe("Scheduled Event → runSweep", () => {
  it("lists the primaries once and fans the due ones out on the bus", async () => {
    const summary = (await handlerWith()(fixture("scheduled-event.json"), lambdaContext)) as SweepSummary;
    expect(kube.calls.filter((c) => c.method === "list").map((c) => c.resource)).toEqual(["proxies"]);
    expect(summary.controllers.proxy?.listed).toBe(2);
    expect((await aws.deliveredMessages()).map((m) => m.request.name)).toHaveLength(
      summary.controllers.proxy?.due ?? -1,
    );
  });
});

describe("Scheduled Event at steady state, with the production operators and default settings", () => {
  /** An External Proxy without a health check, as a tenant writes it (its status is the passes'). */
  const external = (i: number) =>
    kube.seed(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: `steady-${i}`, namespace: "ns2", uid: `uid-steady-${i}`, generation: 1 },
      spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128, scheme: "http" } },
    });

  /** Sweeps, running each sweep's messages as the bus delivers them, until a sweep sends none. */
  async function steadySweep(handler: ReturnType<typeof createHandler>) {
    for (let round = 0; round < 5; round++) {
      const before = kube.calls.length;
      const summary = (await handler(fixture("scheduled-event.json"), lambdaContext)) as SweepSummary;
      const calls = kube.calls.slice(before);
      const events = await aws.delivered();
      if (events.length === 0) return { summary, calls };
      for (const event of events) await handler(event, lambdaContext);
    }
    throw new Error("the sweep kept sending messages");
  }

  it("a sweep sends no message and makes the same API requests for 5 and for 20 External Proxies", async () => {
    const handler = createHandler({
      env: ENV,
      endpoint: moto.endpoint,
      kube: () => kube,
      clock: { now: () => NOW },
      log: silent,
      metrics: noMetrics,
    });
    for (let i = 0; i < 5; i++) external(i);
    const five = await steadySweep(handler);
    for (let i = 5; i < 20; i++) external(i);
    const twenty = await steadySweep(handler);
    console.log(
      `lambda steady sweep: 5 External Proxies ${five.calls.length} requests, 20: ${twenty.calls.length} ` +
        `(${twenty.calls.map((c) => `${c.method} ${c.resource}`).join(", ")}); ${twenty.summary.controllers.proxy?.due} messages`,
    );
    // NOW is in a drift slot of every controller: the drift lists and decisions ran.
    expect(twenty.summary.controllers.proxy).toMatchObject({ drift: true, due: 0, reasons: {} });
    expect(kube.stored(proxyResource, { namespace: "ns2", name: "steady-19" })?.status).toMatchObject({
      ip: "203.0.113.7",
    });
    expect(twenty.calls.map((c) => `${c.method} ${c.resource}`)).toEqual(
      five.calls.map((c) => `${c.method} ${c.resource}`),
    );
    expect(twenty.calls.every((c) => c.method === "list")).toBe(true);
  });
});

describe("anything else", () => {
  it.each([
    [{ Records: [{ eventSource: "aws:sqs" }] }, /unrecognised Lambda event \(keys Records\)/],
    [{ source: "aws.ec2", "detail-type": "EC2 Instance State-change Notification" }, /source=aws\.ec2/],
    ["hello", /unrecognised Lambda event \(string\)/],
  ])("throws a clear error for %j", async (event, message) => {
    await expect(handlerWith()(event, lambdaContext)).rejects.toThrow(message);
  });
});
