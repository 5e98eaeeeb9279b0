/**
 * The Lambda's queue on SQS, against moto's server on loopback: sends (SendMessageBatch with
 * per-message DelaySeconds, read back from moto's own record of each message) and the event
 * source side (a batch received as Lambda's poller does, the production handler, partial batch
 * failures, visibility changes and the redrive to the dead-letter queue).
 */
import { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type ControllerDefinition,
  createRegistry,
  ENVELOPE_VERSION,
  type JobMessage,
  type Message,
  type PassMessage,
  requeueAfter,
} from "../../shared/runtime/index.ts";

const nameOf = (m: Message) => (m.kind === "job" ? m.job.slot : m.request.name);

import { FakeKube } from "../../test/support/fake-kube.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { createHandler, type HandlerOptions } from "./handler.ts";
import {
  consumeSqsEvent,
  DUE_ATTRIBUTE,
  MAX_CALL_BYTES,
  MAX_SHARD_BYTES,
  SendMessageBatchError,
  type SqsEvent,
  type SqsRecord,
  sqsQueue,
} from "./queue.ts";

const NOW = new Date("2026-11-30T12:00:00.400Z");
const NOW_SECONDS = Math.floor(NOW.getTime() / 1000);
const KUBECONFIG_BASE64 = Buffer.from("unused: the kube port is given").toString("base64");
const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
  memoryLimitInMB: "512",
  awsRequestId: "queue",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "queue",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };

const message = (name: string, attempt = 0, listedBytes = 0): Message => ({
  request: { controller: "proxy", namespace: "ns1", name },
  attempt,
  ...(listedBytes
    ? {
        listed: [
          {
            apiVersion: "v1",
            kind: "X",
            metadata: { name, annotations: { pad: "x".repeat(listedBytes) } },
          },
        ],
      }
    : {}),
});

let moto: Moto;
let aws: KubefnAws;
let sqs: SQSClient;
/** The SendMessageBatch inputs of the test's own client, as the SDK got them. */
let calls: { Entries?: { DelaySeconds?: number; MessageBody?: string }[] }[] = [];

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  sqs = new SQSClient({ region: REGION, endpoint: moto.endpoint });
  sqs.middlewareStack.add(
    (next) => async (args) => {
      calls.push(args.input as (typeof calls)[number]);
      return next(args);
    },
    { step: "initialize" },
  );
}, 30_000);
// A queue per test: a message one test delayed must not arrive in the next.
let queues = 0;
beforeEach(async () => {
  calls = [];
  aws = await createKubefnAws(moto.endpoint, { queueName: `kubefn-${++queues}` });
});
afterEach(() => aws.close());
afterAll(async () => {
  vi.unstubAllEnvs();
  sqs?.destroy();
  await moto?.close();
});

const queue = (queueUrl = aws.queueUrl) => sqsQueue({ sqs, queueUrl, clock: { now: () => NOW } });

function handlerWith(controller: Partial<ControllerDefinition> = {}, options: Partial<HandlerOptions> = {}) {
  const kube = new FakeKube();
  for (const name of ["p1", "p2", "p3"])
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name, namespace: "ns1", uid: `uid-${name}`, generation: 1 },
      spec: {},
    });
  const handler = createHandler({
    env: { AWS_REGION: REGION, KUBECONFIG_BASE64, ...aws.env },
    endpoint: moto.endpoint,
    kube: () => kube,
    operators: () => ({
      registry: createRegistry([proxyController({ for: ProxyResource, ...controller })]),
      sweepTasks: [],
    }),
    clock: { now: () => NOW },
    log: silent,
    metrics: noMetrics,
    ...options,
  });
  return (event: SqsEvent) => handler(event, lambdaContext);
}

/** Polls (long-polling `wait` seconds a round) until a batch arrives; up to `rounds` rounds. */
async function pollUntil(handler: (e: SqsEvent) => Promise<unknown>, rounds = 5, wait = 2, target = aws) {
  for (let i = 0; i < rounds; i++) {
    const got = await target.poll(handler, wait);
    if (got) return got;
  }
  throw new Error("nothing arrived");
}

describe("sends: SendMessageBatch on the reconcile queue", () => {
  it("one SQS message per kubefn message, 10 per call, not delayed; the bodies are the messages", async () => {
    const messages = Array.from({ length: 23 }, (_, i) => message(`p${i}`));
    await queue().send(messages);
    expect(calls.map((c) => c.Entries?.length)).toEqual([10, 10, 3]);
    expect(calls.flatMap((c) => c.Entries ?? []).every((e) => e.DelaySeconds === 0)).toBe(true);
    const received = await aws.deliveredMessages();
    expect(received.map(nameOf).sort()).toEqual(messages.map(nameOf).sort());
  });

  it("a 1 s and a 30 s follow-up are held by SQS for exactly those seconds (DelaySeconds), the 1 s one then arrives", async () => {
    await queue().send([message("soon")], 1);
    await queue().send([message("later")], 30);
    expect(calls.map((c) => c.Entries?.map((e) => e.DelaySeconds))).toEqual([[1], [30]]);
    const held = [...(await aws.held()).values()];
    const delayOf = (name: string) =>
      held.find((m) => (JSON.parse(m.body) as PassMessage).request.name === name)?.delaySeconds;
    expect(delayOf("soon")).toBe(1);
    expect(delayOf("later")).toBe(30);
    // Neither is visible at once; the 1 s one is within a few seconds, the 30 s one is not.
    expect(await aws.deliveredMessages()).toEqual([]);
    const got = await pollUntil(async () => ({ batchItemFailures: [] }));
    expect(got.event.Records.map((r) => (JSON.parse(r.body) as PassMessage).request.name)).toEqual(["soon"]);
    expect(await aws.deliveredMessages()).toEqual([]);
  });

  it("sendEach: 23 messages of different delays go in 3 calls, each entry held for its own delay", async () => {
    const entries = Array.from({ length: 23 }, (_, i) => ({ message: message(`d${i}`), delaySeconds: i }));
    await queue().sendEach?.(entries);
    expect(calls.map((c) => c.Entries?.length)).toEqual([10, 10, 3]);
    expect(calls.flatMap((c) => c.Entries ?? []).map((e) => e.DelaySeconds)).toEqual(
      entries.map((_, i) => i),
    );
    const held = [...(await aws.held()).values()];
    for (const { message: m, delaySeconds } of entries.slice(1)) {
      const name = nameOf(m);
      expect(held.find((h) => (JSON.parse(h.body) as PassMessage).request.name === name)?.delaySeconds).toBe(
        delaySeconds,
      );
    }
  });

  it("sendEach: a delay beyond 15 min carries its own due time, the others none", async () => {
    await queue().sendEach?.([
      { message: message("now"), delaySeconds: 0 },
      { message: message("hour"), delaySeconds: 3600 },
    ]);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.Entries?.[0]).not.toHaveProperty("MessageAttributes");
    expect(calls[0]?.Entries?.[1]).toMatchObject({
      DelaySeconds: 900,
      MessageAttributes: { [DUE_ATTRIBUTE]: { DataType: "Number", StringValue: String(NOW_SECONDS + 3600) } },
    });
  });

  it("rounds fractional delays up; a delay beyond 15 min is sent as 900 s carrying its due time", async () => {
    await queue().send([message("fraction")], 0.2);
    await queue().send([message("hour")], 3600);
    expect(calls[0]?.Entries?.[0]).toMatchObject({ DelaySeconds: 1 });
    expect(calls[1]?.Entries?.[0]).toMatchObject({
      DelaySeconds: 900,
      MessageAttributes: { [DUE_ATTRIBUTE]: { DataType: "Number", StringValue: String(NOW_SECONDS + 3600) } },
    });
  });

  it("drops listed objects that would not fit a message and cuts a shard above MAX_SHARD_BYTES, every object in one", async () => {
    const objects = Array.from({ length: 30 }, (_, i) => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: `s${i}`, namespace: "ns1", annotations: { pad: "y".repeat(20_000) } },
    }));
    const shard: JobMessage = {
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: "30-0", objects },
    };
    await queue().send([message("big", 0, 100_000), shard]);
    const bodies = calls.flatMap((c) => c.Entries ?? []).map((e) => e.MessageBody ?? "");
    for (const body of bodies) expect(Buffer.byteLength(body)).toBeLessThan(MAX_CALL_BYTES);
    const received = await aws.deliveredMessages();
    expect(received.find((m) => nameOf(m) === "big")).toEqual(message("big"));
    const pieces = received.filter((m): m is JobMessage => m.kind === "job");
    expect(pieces.length).toBeGreaterThanOrEqual(3);
    for (const p of pieces) expect(Buffer.byteLength(JSON.stringify(p))).toBeLessThanOrEqual(MAX_SHARD_BYTES);
    expect(pieces.flatMap((p) => p.job.objects.map((o) => o.metadata.name)).sort()).toEqual(
      objects.map((o) => o.metadata.name).sort(),
    );
  });

  it("a second's 300 probe views go gzipped as one SQS message under the 64 KB billed as one request, and the consumer gets the shard back", async () => {
    const objects = Array.from({ length: 300 }, (_, i) => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: `tenant-${i % 37}`, name: `proxy-${i}`, resourceVersion: String(100_000 + i) },
      spec: {
        mode: "External",
        endpoint: { host: `10.${i % 200}.${(i * 7) % 250}.${(i * 13) % 250}`, port: 3128, scheme: "http" },
        healthCheck: { probeURL: `https://target-${i % 11}.example.com/health`, intervalSeconds: 30 },
      },
      status: { health: { consecutiveSuccesses: 12 + i, seal: `v1.${crypto.randomUUID()}` } },
    }));
    const shard: JobMessage = {
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: "7-0", objects },
    };
    expect(Buffer.byteLength(JSON.stringify(shard))).toBeGreaterThan(65_536);
    await queue().send([shard], 1);
    const bodies = calls.flatMap((c) => c.Entries ?? []).map((e) => e.MessageBody ?? "");
    expect(bodies).toHaveLength(1);
    expect(Buffer.byteLength(bodies[0]!)).toBeLessThan(65_536);
    const got: unknown[] = [];
    const delivered = await pollUntil(async (event) =>
      consumeSqsEvent(
        event,
        {
          consume: async (deliveries) => {
            got.push(...deliveries.map((d) => d.body));
            return deliveries.map(() => ({ ack: true }));
          },
        },
        { sqs, queueUrl: aws.queueUrl, clock: { now: () => NOW }, log: silent },
      ),
    );
    expect(delivered.event.Records).toHaveLength(1);
    expect(got).toEqual([shard]);
  });

  it("sends nothing for no messages, and throws when the queue refuses the call", async () => {
    await queue().send([]);
    expect(calls).toEqual([]);
    await expect(queue(`${moto.endpoint}/123456789012/no-such-queue`).send([message("p1")])).rejects.toThrow(
      /does not exist|NonExistentQueue/,
    );
    expect(SendMessageBatchError.name).toBe("SendMessageBatchError");
  });
});

describe("the event source: an SQS batch → kubefn.consume → batchItemFailures", () => {
  it("a follow-up the pass asks for 1 s later arrives as a message delayed 1 s, and its pass runs", async () => {
    const reconciled: string[] = [];
    let first = true;
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        if (first) {
          first = false;
          return requeueAfter(1);
        }
        return requeueAfter(30);
      },
    });
    const earlier = new Set((await aws.held()).keys());
    const sentSince = async () => [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
    await queue().send([message("p1")]);
    expect(await pollUntil(handler)).toMatchObject({ failed: [] });
    const held = (await sentSince()).filter((m) => m.body.includes('"follow-up"'));
    expect(held.map((m) => m.delaySeconds)).toEqual([1]);
    const next = await pollUntil(handler);
    expect(next.failed).toEqual([]);
    expect(next.event.Records[0]?.attributes.ApproximateReceiveCount).toBe("1");
    expect(reconciled).toEqual(["p1", "p1"]);
    // The second pass asked for 30 s: a message held for 30 s.
    const followUps = (await sentSince()).filter((m) => m.body.includes('"follow-up"'));
    expect(followUps.map((m) => m.delaySeconds).sort((a, b) => a - b)).toEqual([1, 30]);
  });

  it("a partial batch failure reports only the failed record, whose visibility becomes its backoff", async () => {
    const handler = handlerWith(
      {},
      {
        log: {
          ...silent,
          info(msg, fields) {
            if (msg === "pass" && String(fields?.key).endsWith("/p2")) throw new Error("stdout closed");
          },
        },
      },
    );
    await queue().send([message("p1"), message("p2"), message("p3")]);
    const before = Date.now();
    const got = await pollUntil(handler);
    const after = Date.now();
    const byName = new Map(
      got.event.Records.map((r) => [(JSON.parse(r.body) as PassMessage).request.name, r]),
    );
    expect(got.event.Records).toHaveLength(3);
    expect(got.failed).toEqual([byName.get("p2")?.messageId]);
    // backoffSeconds(attempt 1) is 1–2 s: visible again then, not after the queue's 360 s.
    const held = (await aws.held()).get(byName.get("p2")?.messageId as string);
    expect(held?.visibleAt).toBeGreaterThanOrEqual(before + 1000);
    expect(held?.visibleAt).toBeLessThanOrEqual(after + 2000);
    const again = await pollUntil(async () => ({ batchItemFailures: [] }));
    expect(again.event.Records.map((r) => r.messageId)).toEqual([byName.get("p2")?.messageId]);
    expect(again.event.Records[0]?.attributes.ApproximateReceiveCount).toBe("2");
    expect(await aws.deliveredMessages()).toEqual([]);
  });

  it("a message from a newer release is retried with backoff and reaches the dead-letter queue after maxReceiveCount", async () => {
    const redrive = await createKubefnAws(moto.endpoint, {
      queueName: `kubefn-redrive-${queues}`,
      maxReceiveCount: 3,
    });
    try {
      const kube = new FakeKube();
      const warnings: (Record<string, unknown> & { msg: string })[] = [];
      const handler = createHandler({
        env: { AWS_REGION: REGION, KUBECONFIG_BASE64, ...redrive.env },
        endpoint: moto.endpoint,
        kube: () => kube,
        clock: { now: () => NOW },
        log: { ...silent, warn: (msg, fields) => warnings.push({ ...fields, msg }) },
        metrics: noMetrics,
      });
      const newer = { ...message("p1"), v: ENVELOPE_VERSION + 1 };
      await sqs.send(
        new SendMessageCommand({ QueueUrl: redrive.queueUrl, MessageBody: JSON.stringify(newer) }),
      );
      const failed: string[][] = [];
      for (let receive = 1; receive <= 3; receive++) {
        const got = await pollUntil((e) => handler(e, lambdaContext), 6, 2, redrive);
        expect(got.event.Records[0]?.attributes.ApproximateReceiveCount).toBe(String(receive));
        failed.push(got.failed);
      }
      expect(failed.every((f) => f.length === 1)).toBe(true);
      // (Beside the start's warning that, without STATUS_SEAL_KEY, probes run in the sweep.)
      // (And beside each redelivery's own warning, from the second delivery on.)
      expect(warnings.filter((w) => w.msg.includes("newer release")).map((w) => w.attempts)).toEqual([
        1, 2, 3,
      ]);
      expect(warnings.filter((w) => w.msg.includes("redelivered")).map((w) => w.attempts)).toEqual([2, 3]);
      // The next receive finds it at maxReceiveCount and moves it to the dead-letter queue.
      for (let i = 0; i < 8; i++) {
        await redrive.poll(async () => {
          throw new Error("a message past maxReceiveCount was delivered");
        }, 1);
        const dead = await redrive.dead();
        if (dead.length > 0) {
          expect(dead.map((r) => JSON.parse(r.body))).toEqual([newer]);
          return;
        }
      }
      throw new Error("the message never reached the dead-letter queue");
    } finally {
      redrive.close();
    }
  }, 60_000);

  it("a message due beyond 15 min delivered early is sent on with the remaining delay, not consumed", async () => {
    const reconciled: string[] = [];
    const handler = handlerWith({
      reconcile: async (_ctx, proxy) => {
        reconciled.push(proxy.metadata.name as string);
        return requeueAfter(0);
      },
    });
    const record = (name: string, due: number): SqsRecord => ({
      eventSource: "aws:sqs",
      messageId: `id-${name}`,
      receiptHandle: `handle-${name}`,
      body: JSON.stringify(message(name)),
      attributes: { ApproximateReceiveCount: "1" },
      messageAttributes: { [DUE_ATTRIBUTE]: { stringValue: String(due) } },
    });
    const earlier = new Set((await aws.held()).keys());
    const out = await handler({ Records: [record("p1", NOW_SECONDS + 100), record("p2", NOW_SECONDS)] });
    expect(out).toEqual({ batchItemFailures: [] });
    expect(reconciled).toEqual(["p2"]);
    const sent = [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
    const summary = sent.map((m) => [(JSON.parse(m.body) as PassMessage).request.name, m.delaySeconds]);
    // p1 once more with what remains of its delay (and its due time); p2's pass asked for a follow-up now.
    expect(summary.sort()).toEqual([
      ["p1", 100],
      ["p2", 0],
    ]);
    const p1 = sent.find((m) => m.body.includes('"p1"'));
    expect(JSON.stringify(p1?.attributes)).toContain(String(NOW_SECONDS + 100));
  });
});
