import { readFileSync } from "node:fs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { SweepSummary } from "../../shared/app/sweep.ts";
import { encodeCloudWatchLogs } from "../../shared/audit-export/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { Resources } from "../../shared/kube/index.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import type { Resource } from "../../shared/runtime/core/index.ts";
import {
  type ControllerDefinition,
  createRegistry,
  done,
  ENVELOPE_VERSION,
  messageKey,
  requeueAfter,
  statusSealFrom,
} from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { createHandler, type HandlerRole } from "./handler.ts";

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
/** `QUEUE_URL` is moto's queue, set once it is made. */
const ENV: Record<string, string> = {
  AWS_REGION: "us-east-1",
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

// SQS is moto's server: the reconcile queue as the template makes it.
let moto: Moto;
let aws: KubefnAws;
let kube: FakeKube;

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
  Object.assign(ENV, aws.env);
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
});

function handlerWith(
  controller: Partial<ControllerDefinition> = {},
  role?: HandlerRole,
  env: Record<string, string> = {},
) {
  return createHandler({
    ...(role ? { role } : {}),
    env: { ...ENV, ...env },
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
    "%s: an audit EventList with the bearer token → 202 and an SQS message carrying the request",
    async (name) => {
      const res = (await handlerWith()(fixture(name), lambdaContext)) as { statusCode: number; body: string };
      expect(res.statusCode).toBe(202);
      expect(JSON.parse(res.body)).toMatchObject({ source: "audit", enqueued: 1 });
      // The key only: the audit event's object (the sender's word) never rides along (issue 30).
      const delivered = await aws.deliveredMessages();
      expect(delivered).toMatchObject([
        {
          request: { controller: "proxy", namespace: "ns1", name: "p1" },
          attempt: 0,
          trigger: { kind: "audit" },
        },
      ]);
      expect(delivered.map((m) => Object.keys(m).filter((k) => k === "snapshot" || k === "listed"))).toEqual([
        [],
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

  /** A Function URL `GET /` from a browser, with `headers` beside the fixture's. */
  function getPage(headers: Record<string, string> = {}) {
    const post = fixture("function-url-post-events.json") as Record<string, unknown> & {
      headers: Record<string, string>;
      requestContext: { http: Record<string, string> };
    };
    const { authorization: _, "content-length": __, ...rest } = post.headers;
    return {
      ...post,
      rawPath: "/",
      rawQueryString: "",
      queryStringParameters: undefined,
      headers: { ...rest, accept: "text/html", ...headers },
      requestContext: {
        ...post.requestContext,
        http: { ...post.requestContext.http, method: "GET", path: "/" },
      },
      body: undefined,
    };
  }
  type PageAnswer = { statusCode: number; headers: Record<string, string>; body: string };

  it("a Function URL GET / without API_TOKEN: the fleet page is closed (public URL), with how to open it", async () => {
    const res = (await handlerWith()(getPage(), lambdaContext)) as PageAnswer;
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain("the fleet page is closed");
    expect(res.body).toContain("FLEET_PAGE=open");
    expect(res.body).not.toContain("ns1/p1");
  });

  it("a Function URL GET / behind API_TOKEN: 401 without it, the page with it", async () => {
    const apiToken = "fleet-page-token-0123456789";
    const refused = (await handlerWith({}, undefined, { API_TOKEN: apiToken })(
      getPage(),
      lambdaContext,
    )) as PageAnswer;
    expect(refused.statusCode).toBe(401);
    const res = (await handlerWith({}, undefined, { API_TOKEN: apiToken })(
      getPage({ authorization: `Bearer ${apiToken}` }),
      lambdaContext,
    )) as PageAnswer;
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain("<tr><td>ns1/p1</td>");
  });

  it("a Function URL GET / with FLEET_PAGE=open → the fleet page, the same as every platform's", async () => {
    const res = (await handlerWith({}, undefined, { FLEET_PAGE: "open" })(
      getPage(),
      lambdaContext,
    )) as PageAnswer;
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

describe("a status written with kubefn's token outside kubefn (issue 20), across Lambda instances", () => {
  /** A Function URL POST of an audit EventList holding `items`. */
  function auditPost(items: unknown[]) {
    const post = fixture("function-url-post-events.json") as Record<string, unknown> & {
      headers: Record<string, string>;
    };
    const { "content-length": _, ...headers } = post.headers;
    return {
      ...post,
      headers,
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items }),
    };
  }
  /** The audit event of a status patch by kubefn's identity that stored `object`. */
  const statusPatch = (object: Record<string, unknown>) => ({
    level: "RequestResponse",
    auditID: `a-${Math.random()}`,
    stage: "ResponseComplete",
    verb: "patch",
    user: { username: "system:serviceaccount:kubefn-system:kubefn" },
    objectRef: {
      apiGroup: "crawl.kubefn.dev",
      apiVersion: "v1alpha1",
      resource: "proxies",
      subresource: "status",
      namespace: "ns1",
      name: "p1",
    },
    responseStatus: { code: 200 },
    responseObject: object,
    stageTimestamp: NOW.toISOString(),
  });

  const sealKey = "status-seal-key-0123456789";

  it("intake on one instance sends the pass, a pass on another rewrites it, sealed; kubefn's own status write sends nothing", async () => {
    // The intake function and the reconcile function read the same STATUS_SEAL_KEY secret:
    // nothing else is shared between them.
    const seal = statusSealFrom({ statusSealKey: sealKey })!;
    const key = { namespace: "ns1", name: "p1" };
    const recompute: Partial<ControllerDefinition> = {
      reconcile: async (_ctx, p) => {
        p.status = { ...(p.status as object), phase: "Unhealthy", ip: "10.0.0.1" };
        return done();
      },
    };
    const intake = handlerWith(recompute, "intake", { STATUS_SEAL_KEY: sealKey });
    const reconcile = handlerWith(recompute, "reconcile", { STATUS_SEAL_KEY: sealKey });
    const stored = kube.stored(ProxyKind, key)!;
    const kubefns = { phase: "Unhealthy", ip: "10.0.0.1" };
    const sealed = { ...stored, status: { ...kubefns, seal: await seal.seal(stored, kubefns) } };
    kube.seed(ProxyKind, sealed);

    const own = (await intake(auditPost([statusPatch(sealed)]), lambdaContext)) as {
      statusCode: number;
      body: string;
    };
    expect(own.statusCode).toBe(202);
    expect(JSON.parse(own.body)).toMatchObject({ enqueued: 0 });

    const forged = { ...sealed, status: { ...sealed.status, ip: "203.0.113.66", phase: "Ready" } };
    kube.seed(ProxyKind, forged);
    const res = (await intake(auditPost([statusPatch(forged)]), lambdaContext)) as {
      statusCode: number;
      body: string;
    };
    expect(JSON.parse(res.body)).toMatchObject({ enqueued: 1 });
    const batches = await aws.delivered();
    expect(batches.flatMap((b) => b.Records)).toHaveLength(1);
    for (const batch of batches) {
      expect(await reconcile(batch, lambdaContext)).toEqual({ batchItemFailures: [] });
    }
    const rewritten = kube.stored(ProxyKind, key)!;
    expect(rewritten.status).toMatchObject(kubefns);
    expect(await seal.verify(rewritten)).toBe("sealed");
    const events = await kube.list<{ reason?: string; type?: string } & KubeObject>(Resources.Event, {
      namespace: "ns1",
    });
    expect(events.items.find((e) => e.reason === "ForeignStatusWrite")).toMatchObject({ type: "Warning" });
  });

  it("without STATUS_SEAL_KEY no key is derived from the audit token (the reconcile function reads none): nothing sealed, nothing sent", async () => {
    const key = { namespace: "ns1", name: "p1" };
    const stored = kube.stored(ProxyKind, key)!;
    const unsealed = { ...stored, status: { phase: "Unhealthy", ip: "10.0.0.1" } };
    const res = (await handlerWith({}, "intake")(auditPost([statusPatch(unsealed)]), lambdaContext)) as {
      body: string;
    };
    expect(JSON.parse(res.body)).toMatchObject({ enqueued: 0 });
  });
});

describe("SQS batches → runPass → batchItemFailures", () => {
  it("a batch from the reconcile queue (the event source's shape) runs one pass per record; a requeue is a message delayed 30 s", async () => {
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        return requeueAfter(30);
      },
    });
    const earlier = new Set((await aws.held()).keys());
    expect(await handler(fixture("sqs-event.json"), lambdaContext)).toEqual({ batchItemFailures: [] });
    expect(reconciled.sort()).toEqual(["p1", "p2"]);
    const sent = [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
    expect(
      sent
        .map((m) => [(JSON.parse(m.body) as { request: { name: string } }).request.name, m.delaySeconds])
        .sort(),
    ).toEqual([
      ["p1", 30],
      ["p2", 30],
    ]);
  });
});

describe("the previous release's kubefn.reconcile events (bus and one-time schedules) → runPass", () => {
  it("schedules 0.1.0 left in flight are consumed: their passes run, and follow-ups go to SQS", async () => {
    kube.seed(ProxyKind, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: {
        name: "local",
        namespace: "team-a",
        uid: "6c1f7d2e-3b7a-4c43-9d7a-2f8e0d6b1a11",
        generation: 1,
      },
      spec: {},
    });
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(`${proxy.metadata.namespace}/${proxy.metadata.name}`);
        return requeueAfter(0);
      },
    });
    expect(await handler(fixture("0.1.0/schedule-input.json"), lambdaContext)).toEqual({
      passes: 1,
      skipped: 0,
    });
    expect(reconciled).toEqual(["team-a/local"]);
    expect(await aws.deliveredMessages()).toMatchObject([
      {
        v: ENVELOPE_VERSION,
        request: { namespace: "team-a", name: "local" },
        trigger: { kind: "follow-up" },
      },
    ]);
  });

  it("an EventBridge envelope from the bus runs one pass per message; a requeue is an SQS message delayed 30 s", async () => {
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        return requeueAfter(30);
      },
    });
    const earlier = new Set((await aws.held()).keys());
    const out = await handler(fixture("eventbridge-reconcile.json"), lambdaContext);
    expect(out).toEqual({ passes: 2, skipped: 0 });
    expect(reconciled.sort()).toEqual(["p1", "p2"]);
    const sent = [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
    expect(sent.map((m) => m.delaySeconds)).toEqual([30, 30]);
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
    // requeueAfter(0) goes straight onto the queue
    expect(await aws.deliveredMessages()).toEqual([
      {
        v: ENVELOPE_VERSION,
        cluster: "default",
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
  it("lists the primaries once and fans the due ones out on the queue", async () => {
    const summary = (await handlerWith()(fixture("scheduled-event.json"), lambdaContext)) as SweepSummary;
    // A cold instance first checks its admission policies (two lists, then cached for the
    // re-check period), then lists the primaries once.
    expect(kube.calls.filter((c) => c.method === "list").map((c) => c.resource)).toEqual([
      "validatingadmissionpolicies",
      "validatingadmissionpolicybindings",
      "proxies",
    ]);
    expect(summary.controllers.proxy?.listed).toBe(2);
    expect((await aws.deliveredMessages()).map((m) => messageKey(m))).toHaveLength(
      summary.controllers.proxy?.due ?? -1,
    );
  });
});

describe("Scheduled Event → the sweep planned from the schedule's time", () => {
  it("a sweep invoked 2.4 s after its minute plans from the event's `time`, not from the invocation's clock", async () => {
    const plannedFrom: (Date | undefined)[] = [];
    const handler = createHandler({
      env: ENV,
      endpoint: moto.endpoint,
      kube: () => kube,
      operators: () => ({
        registry: createRegistry([proxyController({ for: ProxyKind })]),
        sweepTasks: [
          {
            name: "planner",
            controller: "proxy",
            start: (_ctx, _memo, info) => {
              plannedFrom.push(info?.at);
              return { page: async () => {}, finish: async () => ({}) };
            },
          },
        ],
      }),
      clock: { now: () => new Date(NOW.getTime() + 2400) },
      log: silent,
      metrics: noMetrics,
    });
    await handler(fixture("scheduled-event.json"), lambdaContext);
    expect(plannedFrom).toEqual([new Date("2026-11-30T12:00:00Z")]);
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

  /** Sweeps, running each sweep's messages as the queue delivers them, until a sweep sends none. */
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

describe("the two deployed functions: intake and reconcile take only their own events", () => {
  it("the intake function answers the Function URL as `handler` does", async () => {
    const res = (await handlerWith({}, "intake")(
      fixture("function-url-post-events.json"),
      lambdaContext,
    )) as {
      statusCode: number;
    };
    expect(res.statusCode).toBe(202);
    expect(await aws.deliveredMessages()).toMatchObject([
      { request: { name: "p1" }, trigger: { kind: "audit" } },
    ]);
  });

  it("the intake function passes a 0.1.0 schedule (which names it) on to the queue without running a pass", async () => {
    const reconciled: string[] = [];
    const intake = handlerWith(
      {
        reconcile: async (_ctx, proxy) => {
          reconciled.push(proxy.metadata.name as string);
          return requeueAfter(0);
        },
      },
      "intake",
    );
    const input = fixture("0.1.0/schedule-input.json") as { detail: { messages: unknown[] } };
    expect(await intake(input, lambdaContext)).toEqual({ forwarded: 1 });
    expect(reconciled).toEqual([]);
    // The message as 0.1.0 wrote it, for the reconcile function to consume.
    expect(await aws.deliveredMessages()).toEqual(input.detail.messages);
  });

  it.each([
    [
      { Records: [{ eventSource: "aws:sqs", messageId: "m", receiptHandle: "r", body: "{}" }] },
      "an SQS batch",
    ],
    [{ source: "aws.events", "detail-type": "Scheduled Event" }, "the sweep's tick"],
    [{ awslogs: { data: "H4sIAAAAAAAAAwMAAAAAAAAAAAA=" } }, "a CloudWatch Logs delivery"],
  ])("the intake function refuses %j (%s): it runs no pass, sweep or audit log", async (event, _what) => {
    await expect(handlerWith({}, "intake")(event, lambdaContext)).rejects.toThrow(
      /the intake function expects an HTTP, a kubefn\.reconcile event/,
    );
    expect(await aws.delivered()).toEqual([]);
  });

  it("the reconcile function refuses HTTP: nothing from the Function URL reaches it", async () => {
    await expect(
      handlerWith({}, "reconcile")(fixture("function-url-post-events.json"), lambdaContext),
    ).rejects.toThrow(
      /the reconcile function expects an SQS, a Scheduled Event, a CloudWatch Logs, a kubefn\.reconcile event/,
    );
    expect(await aws.delivered()).toEqual([]);
  });

  it("the reconcile function sweeps on the schedule's tick", async () => {
    const out = (await handlerWith({}, "reconcile")(
      fixture("scheduled-event.json"),
      lambdaContext,
    )) as SweepSummary;
    expect(out.controllers.proxy?.listed).toBe(2);
  });
});

describe("a fleet (KUBEFN_CLUSTERS) on one stack", () => {
  /** Two EKS clusters, each reached (here) through the test's FakeKube. */
  const fleetEnv = {
    AWS_REGION: "us-east-1",
    KUBEFN_CLUSTERS: JSON.stringify(
      ["east", "west"].map((name) => ({
        name,
        server: `https://${name}.eks.amazonaws.com`,
        credential: { kind: "eks", clusterName: `${name}-eks`, region: "us-east-1" },
      })),
    ),
  };
  const auditDelivery = (logGroup: string) =>
    encodeCloudWatchLogs({
      messageType: "DATA_MESSAGE",
      owner: "111122223333",
      logGroup,
      logStream: "kube-apiserver-audit-0123456789abcdef",
      subscriptionFilters: ["kubefn-audit"],
      logEvents: [
        {
          id: "1",
          timestamp: NOW.getTime(),
          message: JSON.stringify({
            kind: "Event",
            apiVersion: "audit.k8s.io/v1",
            level: "Metadata",
            auditID: "a-1",
            stage: "ResponseComplete",
            verb: "update",
            user: { username: "alice" },
            objectRef: {
              resource: "proxies",
              namespace: "ns1",
              name: "p1",
              apiGroup: "crawl.kubefn.dev",
              apiVersion: "v1alpha1",
            },
            responseStatus: { code: 200 },
          }),
        },
      ],
    });

  it("an EKS audit log delivery is the cluster's whose log group sent it; another group's is refused", async () => {
    const handler = createHandler({
      env: { ...ENV, ...fleetEnv, KUBECONFIG_BASE64: "", AUDIT_TOKEN: "" },
      endpoint: moto.endpoint,
      kube: () => kube,
      operators: () => ({ registry: createRegistry([proxyController({ for: ProxyKind })]), sweepTasks: [] }),
      clock: { now: () => NOW },
      log: silent,
      metrics: noMetrics,
    });
    await handler({ awslogs: { data: await auditDelivery("/aws/eks/west-eks/cluster") } }, lambdaContext);
    expect((await aws.deliveredMessages()).map((m) => m.cluster)).toEqual(["west"]);
    expect(
      await handler({ awslogs: { data: await auditDelivery("/aws/eks/south-eks/cluster") } }, lambdaContext),
    ).toMatchObject({ enqueued: 0, acknowledged: "UnknownLogGroup" });
    expect(await aws.deliveredMessages()).toEqual([]);
  });

  it("a queued message runs in its own cluster's kubefn, one of an undeclared cluster is dropped", async () => {
    const reconciled: string[] = [];
    const handler = createHandler({
      env: { ...ENV, ...fleetEnv, KUBECONFIG_BASE64: "", AUDIT_TOKEN: "" },
      endpoint: moto.endpoint,
      kube: () => kube,
      operators: () => ({
        registry: createRegistry([
          proxyController({
            for: ProxyKind,
            reconcile: async (pass) => {
              reconciled.push(`pass ${pass.request.name}`);
              return done();
            },
          }),
        ]),
        sweepTasks: [],
      }),
      clock: { now: () => NOW },
      log: silent,
      metrics: noMetrics,
    });
    const record = (body: unknown, id: string) => ({
      messageId: id,
      receiptHandle: id,
      body: JSON.stringify(body),
      attributes: { ApproximateReceiveCount: "1" },
      eventSource: "aws:sqs",
    });
    const pass = (cluster: string) => ({
      v: ENVELOPE_VERSION,
      cluster,
      request: { controller: "proxy", namespace: "ns1", name: "p1" },
      attempt: 0,
    });
    const out = await handler(
      { Records: [record(pass("west"), "m1"), record(pass("south"), "m2")] },
      lambdaContext,
    );
    expect(out).toEqual({ batchItemFailures: [] });
    expect(reconciled).toEqual(["pass p1"]);
  });
});
