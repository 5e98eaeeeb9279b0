/**
 * Health probes on Lambda fan out as probe shards (PROBE_SHARD_SIZE, 40 by default): the sweep
 * sends each shard to the reconcile queue delayed to its Proxies' phase (DelaySeconds, to the
 * second), each carrying its Proxies; when it arrives, the function probes them. Against moto's
 * SQS (each message's DelaySeconds read back from moto), the production handler and prober, a
 * fake clock across consecutive sweeps, and a real forward proxy and target on loopback.
 */

import { SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { probeDelays } from "../../shared/health/index.ts";
import type { KubeObject } from "../../shared/kube/index.ts";
import {
  ENVELOPE_VERSION,
  expandedBody,
  type JobMessage,
  type Message,
  messageAuthenticatorFrom,
} from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import { LOOPBACK_PROBE_CIDRS } from "../../test/support/loopback.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../../test/support/probe-fixtures.ts";
import { createHandler } from "./handler.ts";
import { MAX_CALL_BYTES } from "./queue.ts";

const NOW = new Date("2026-11-30T12:00:00.000Z");
const ENV = {
  AWS_REGION: "us-east-1",
  QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
  KUBECONFIG_BASE64: Buffer.from("unused: the kube port is given").toString("base64"),
  // The forward proxy and the targets are loopback fixtures.
  PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
  // Keys the MAC a shard's objects carry on the queue (shared/runtime/message/message-mac.ts).
  STATUS_SEAL_KEY: "probe-shards-seal-key-0123456789abcdef",
};
const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
  memoryLimitInMB: "512",
  awsRequestId: "probe-shards",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "probe-shards",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;
const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };
const originalSend = SQSClient.prototype.send;
const sweepEvent = { source: "aws.events", "detail-type": "Scheduled Event", detail: {} };

let moto: Moto;
let aws: KubefnAws;
let forward: ForwardProxy;
let target: Target;

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  [moto, forward, target] = await Promise.all([startMoto(), startForwardProxy(), startHttpTarget()]);
  aws = await createKubefnAws(moto.endpoint);
}, 30_000);
beforeEach(async () => {
  await aws.takeAll();
});
afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await Promise.all([moto?.close(), forward?.close(), target?.close()]);
});

/** An External Proxy behind the loopback forward proxy, probing `/<name>` every `intervalSeconds`. */
function externalProxy(name: string, intervalSeconds: number, padBytes = 0): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      namespace: "crawl",
      name,
      uid: `uid-${name}`,
      ...(padBytes ? { annotations: { "example.com/notes": "x".repeat(padBytes) } } : {}),
    },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: forward.port },
      // A shard carries the probe URL (not the annotations): padded there, it makes the shard large.
      healthCheck: {
        probeURL: `http://127.0.0.1:${target.port}/${name}${padBytes ? `?pad=${"y".repeat(padBytes)}` : ""}`,
        intervalSeconds,
      },
    },
  };
}

function handlerOver(kube: FakeKube, env: Record<string, string> = ENV, clock = { now: () => NOW }) {
  return createHandler({
    env,
    endpoint: moto.endpoint,
    kube: () => kube,
    clock,
    log: silent,
    metrics: noMetrics,
  });
}

/** A message as the queue holds it, expanded where the queue gzipped it (as the consumer does). */
const bodyOf = async (m: { body: string }) => (await expandedBody(JSON.parse(m.body))) as Message;
const shardNames = (messages: Message[]) =>
  messages.flatMap((m) => (m.kind === "job" ? m.job.objects : []).map((o) => o.metadata.name as string));
const probedNames = (since: number) =>
  forward.requests.slice(since).map((url) => new URL(url).pathname.slice(1));
const tally = (names: string[]) => {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (out[n] ?? 0) + 1;
  return out;
};

describe("Lambda probe shards on SQS, delayed to the second (moto)", () => {
  it.each([30, 45])(
    "a %i s Proxy is probed every intervalSeconds across six consecutive sweeps: each shard is a message delayed to its phase",
    async (interval) => {
      const kube = new FakeKube();
      const names = [`c${interval}a`, `c${interval}b`, `c${interval}c`];
      for (const name of names) kube.seed(proxyResource, externalProxy(name, interval));
      let now = NOW;
      const handler = handlerOver(kube, ENV, { now: () => now });
      const before = forward.requests.length;
      const dueTimes = new Map<string, number[]>(names.map((n) => [n, []]));
      const shards: { message: Message; due: number }[] = [];
      for (let sweep = 0; sweep < 6; sweep++) {
        now = new Date(NOW.getTime() + sweep * 60_000);
        const earlier = new Set((await aws.held()).keys());
        await handler(sweepEvent, lambdaContext);
        const sent = [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
        for (const m of sent) {
          const message = await bodyOf(m);
          if (message.kind !== "job") continue; // a new Proxy's drift pass
          const due = now.getTime() + m.delaySeconds * 1000;
          // The job is due when SQS delivers it: no minute's rounding.
          expect(message.job.due).toBe(due);
          shards.push({ message, due });
          for (const name of shardNames([message])) dueTimes.get(name)?.push(due);
        }
        await aws.takeAll();
      }
      for (const name of names) {
        const times = (dueTimes.get(name) ?? []).sort((a, b) => a - b);
        expect(times.length).toBeGreaterThanOrEqual(Math.floor(360 / interval) - 1);
        expect(new Set(times.slice(1).map((t, i) => (t - times[i]!) / 1000))).toEqual(new Set([interval]));
      }
      // Each shard arrives when it is due (the clock set to then) and probes its Proxies.
      for (const { message, due } of shards.sort((a, b) => a.due - b.due)) {
        now = new Date(due);
        const out = await handler(
          {
            Records: [
              {
                eventSource: "aws:sqs",
                messageId: `shard-${due}`,
                receiptHandle: `shard-${due}`,
                body: JSON.stringify(message),
                attributes: { ApproximateReceiveCount: "1" },
              },
            ],
          },
          lambdaContext,
        );
        expect(out).toEqual({ batchItemFailures: [] });
      }
      const probed = tally(probedNames(before));
      // (A probe outside the latency band asks for two more: Decision 15.)
      for (const name of names) expect(probed[name]).toBeGreaterThanOrEqual(dueTimes.get(name)?.length ?? 1);
      expect(Object.keys(probed).sort()).toEqual([...names].sort());
    },
    60_000,
  );

  it("a sweep sends its shards ten to a SendMessageBatch, each entry delayed to its own phase", async () => {
    const kube = new FakeKube();
    const names = Array.from({ length: 12 }, (_, i) => `b${i}`);
    for (const name of names) kube.seed(proxyResource, externalProxy(name, 30));
    const calls: { bodies: string[]; delays: number[] }[] = [];
    const send = vi.spyOn(SQSClient.prototype, "send");
    send.mockImplementation(async function (this: SQSClient, command: unknown, ...rest: unknown[]) {
      if (command instanceof SendMessageBatchCommand) {
        const entries = command.input.Entries ?? [];
        calls.push({
          bodies: entries.map((e) => e.MessageBody ?? ""),
          delays: entries.map((e) => e.DelaySeconds ?? 0),
        });
      }
      return Reflect.apply(originalSend, this, [command, ...rest]);
    });
    try {
      await handlerOver(kube)(sweepEvent, lambdaContext);
    } finally {
      send.mockRestore();
    }
    const held = [...(await aws.held()).values()];
    const jobs = (await Promise.all(held.map(bodyOf))).filter(
      (m) => m.kind === "job" && shardNames([m]).some((n) => names.includes(n)),
    );
    // The shards went in calls of up to ten (their own), one call per ten shards, not one per shard.
    const kinds = await Promise.all(
      calls.map(async (c) => Promise.all(c.bodies.map(async (body) => (await bodyOf({ body })).kind))),
    );
    const shardCalls = calls.filter((_, i) => kinds[i]!.includes("job"));
    expect(shardCalls.map((c) => c.bodies.length).reduce((a, b) => a + b, 0)).toBe(jobs.length);
    expect(shardCalls.length).toBe(Math.ceil(jobs.length / 10));
    expect(new Set(shardCalls.flatMap((c) => c.delays)).size).toBeGreaterThan(1);
    expect(shardNames(jobs).sort()).toEqual([...names, ...names].sort());
  });

  it("a shard too large for one message is cut into several, every Proxy in exactly one", async () => {
    const kube = new FakeKube();
    // 40 Proxies of ~9 KB (in what a probe needs) at one phase of the minute: their one shard would be ~360 KB.
    const phase = (name: string) => probeDelays({ namespace: "crawl", name }, 60, NOW, 60)[0];
    const names = Array.from({ length: 4000 }, (_, i) => `big${i}`)
      .filter((n) => phase(n) === 7)
      .slice(0, 40);
    expect(names).toHaveLength(40);
    for (const name of names) kube.seed(proxyResource, externalProxy(name, 60, 9_000));
    const handler = handlerOver(kube, { ...ENV, PROBE_SHARD_SIZE: "40" });
    const earlier = new Set((await aws.held()).keys());
    await handler(sweepEvent, lambdaContext);
    const sent = [...(await aws.held()).values()].filter((m) => !earlier.has(m.id));
    const bodies = await Promise.all(sent.map(bodyOf));
    const shards = sent.filter((_, i) => bodies[i]?.kind === "job");
    expect(shards.length).toBeGreaterThanOrEqual(2);
    // Each within kubefn's budget per message, under the platform's 256 KB, all delayed 7 s.
    for (const m of shards) {
      expect(Buffer.byteLength(m.body)).toBeLessThan(MAX_CALL_BYTES);
      expect(m.delaySeconds).toBe(7);
    }
    const messages = (await Promise.all(shards.map(bodyOf))) as JobMessage[];
    expect(shardNames(messages).sort()).toEqual([...names].sort());
    const requestNames = messages.map((m) => m.job.slot);
    expect(new Set(requestNames).size).toBe(requestNames.length);
    // Every piece still carries kubefn's MAC over its objects: the reconcile function runs it.
    const mac = messageAuthenticatorFrom({ statusSealKey: ENV.STATUS_SEAL_KEY })!;
    for (const m of messages) expect(await mac.verify(m)).toBe(true);
  }, 30_000);

  it.each([
    ["without a MAC", undefined],
    ["with a MAC under a key the sender chose", "a-key-the-sender-chose-0123456789"],
  ])(
    "a probe shard someone with sqs:SendMessage forged (%s) is acked, counted and probes nothing",
    async (_, senderKey) => {
      const kube = new FakeKube();
      const counted: string[] = [];
      const handler = createHandler({
        env: ENV,
        endpoint: moto.endpoint,
        kube: () => kube,
        clock: { now: () => NOW },
        log: silent,
        metrics: {
          ...noMetrics,
          count: (name, labels) => void counted.push(`${name}${JSON.stringify(labels)}`),
        },
      });
      const forged: JobMessage = {
        kind: "job",
        v: ENVELOPE_VERSION,
        job: {
          controller: "proxy",
          task: "probe",
          slot: "0",
          objects: [externalProxy("forged", 30)],
          due: NOW.getTime(),
        },
      };
      const body = senderKey
        ? await messageAuthenticatorFrom({ statusSealKey: senderKey })!.sign(forged)
        : forged;
      const before = forward.requests.length;
      const out = await handler(
        {
          Records: [
            {
              eventSource: "aws:sqs",
              messageId: "forged",
              receiptHandle: "forged",
              body: JSON.stringify(body),
              attributes: { ApproximateReceiveCount: "1" },
            },
          ],
        },
        lambdaContext,
      );
      expect(out).toEqual({ batchItemFailures: [] });
      expect(probedNames(before)).toEqual([]);
      expect(counted).toContain('kubefn_messages_dropped_total{"reason":"unauthenticated"}');
    },
    30_000,
  );
});
