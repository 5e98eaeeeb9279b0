/**
 * Queue faults on each platform's queue binding — the Node host's work queue, the Workers queue
 * consumer (`kubefn.consume` settled as the Worker's `queue` handler settles it) and the Lambda handler's reconcile events — against the real API
 * server, with the real proxy operator and pod provider:
 *
 * - a message delivered twice in one batch and the batch redelivered: one instance, converged;
 * - a message delivered after its Proxy was deleted and recreated under the same name (new UID),
 *   as a late follow-up and as a late and a fresh sweep message, twice: the recreated Proxy is
 *   never touched by them (no finalizer, no status, no instance, no write by kubefn at all); an
 *   event for it (no UID) then converges it with exactly one instance of its own.
 */

import { randomBytes } from "node:crypto";
import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createHandler } from "../../functions/aws/handler.ts";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { settle } from "../../functions/cloudflare/queue.ts";
import { installCrdsAndRbac, optInNamespace, serviceAccountToken } from "../../functions/node/install.ts";
import { WorkQueue } from "../../functions/node/work-queue.ts";
import { createKubefn, createOperators, type Operators } from "../../shared/app/index.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import {
  createFetchTransport,
  createKube,
  type Kube,
  type KubeObject,
  listAll,
  Resources,
} from "../../shared/kube/index.ts";
import { type Context, type Message, type PassMessage, runPass } from "../../shared/runtime/index.ts";
import { LISTED_MAX_AGE_SECONDS } from "../../shared/runtime/pass/index.ts";
import { planSweep } from "../../shared/runtime/sweep/index.ts";
import { clusterInfo, eventually } from "../setup/cluster.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { createKubefnAws, type KubefnAws, type Moto, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { findProblems, removeNamespace } from "./scenario.ts";

type Proxy = ProxyObject & KubeObject;

/** A platform's queue binding: deliver messages as it would, and hand back what it sent on. */
interface Platform {
  deliver(messages: Message[]): Promise<void>;
  /** Follow-ups sent since the last call (none for the Node host: its timers deliver them). */
  drain(): Promise<Message[]>;
  close(): Promise<void>;
}

const silent = { info() {}, warn() {}, error() {} };
const noMetrics = { count() {}, observe() {}, gauge() {} };

let admin: Kube;
let kubefn: Kube;
let operators: Operators;
let kubefnToken: string;
let moto: Moto;
let aws: KubefnAws;
const namespaces: string[] = [];

beforeAll(async () => {
  const { httpProxy, adminToken } = clusterInfo();
  const adminTransport = createFetchTransport({ server: httpProxy, token: adminToken });
  admin = createKube(adminTransport, { fieldManager: "chaos" });
  await installCrdsAndRbac(admin);
  kubefnToken = await serviceAccountToken(adminTransport, "kubefn-system", "kubefn");
  kubefn = createKube(createFetchTransport({ server: httpProxy, token: kubefnToken }), {
    fieldManager: "kubefn",
  });
  operators = createOperators({
    prober: createNodeProber(),
    sweepPeriodSeconds: 60,
    probeAllowList: loopbackProbeAllowList,
  });
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
}, 120_000);

afterAll(async () => {
  try {
    await Promise.all(namespaces.map((ns) => removeWithProxies(ns)));
  } finally {
    vi.unstubAllEnvs();
    aws?.close();
    await moto?.close();
  }
}, 180_000);

/**
 * Deletes the namespace's Proxies and runs their passes (a Node host work queue, as a host would)
 * until their finalizers let them go, then the namespace, and waits until it is gone: a Managed
 * Proxy left in a deleted namespace would hold it terminating, for the next file's host to finish.
 */
async function removeWithProxies(namespace: string): Promise<void> {
  const platform = nodeHost();
  try {
    await eventually(
      async () => {
        const left = await listAll<Proxy>(admin, proxyResource, { namespace });
        if (left.length === 0) return true;
        for (const p of left)
          if (!p.metadata.deletionTimestamp)
            await admin.delete(proxyResource, { namespace, name: p.metadata.name! }).catch(() => undefined);
        await platform.deliver(
          left.map((p) => ({ request: request(namespace, p.metadata.name!), attempt: 0 })),
        );
        return undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, what: `the Proxies of ${namespace} gone` },
    );
  } finally {
    await platform.close();
  }
  if (!(await removeNamespace(admin, namespace))) throw new Error(`namespace ${namespace} not gone`);
}

function baseContext(queue: Context["queue"]): Context {
  return {
    kube: kubefn,
    queue,
    clock: { now: () => new Date() },
    log: silent,
    metrics: noMetrics,
    random: Math.random,
  };
}

function nodeHost(): Platform {
  const ctx = baseContext({ send: async () => undefined });
  const queue: WorkQueue = new WorkQueue({
    concurrency: 4,
    handle: async (m) => {
      if (m.kind !== "job") await runPass(ctx, operators.registry, m);
    },
  });
  ctx.queue = queue;
  return {
    async deliver(messages) {
      await queue.send(messages);
      await queue.idle();
    },
    drain: async () => [],
    close: () => queue.close(),
  };
}

function workers(): Platform {
  let sent: Message[] = [];
  const ctx = baseContext({
    send: async (messages) => {
      sent.push(...structuredClone(messages));
    },
  });
  const settings = parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" });
  const worker = createKubefn(settings, { ...ctx, prober: createNodeProber() }, operators);
  return {
    async deliver(messages) {
      const batch = messages.map((body) => ({
        body: structuredClone(body),
        attempts: 1,
        ack() {},
        retry() {},
      }));
      settle(batch, await worker.consume(batch));
    },
    async drain() {
      const out = sent;
      sent = [];
      return out;
    },
    close: async () => undefined,
  };
}

function lambda(): Platform {
  const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://203.0.113.10:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: c, context: { cluster: c, user: u } }]
current-context: c
`;
  const handler = createHandler({
    env: {
      AWS_REGION: "us-east-1",
      QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
      KUBECONFIG_BASE64: Buffer.from(kubeconfig).toString("base64"),
    },
    endpoint: moto.endpoint,
    kube: () => kubefn,
    operators: () => operators,
    log: silent,
    metrics: noMetrics,
  });
  const context = {
    functionName: "kubefn",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
    memoryLimitInMB: "512",
    awsRequestId: "chaos",
    logGroupName: "/aws/lambda/kubefn",
    logStreamName: "chaos",
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 60_000,
  } satisfies LambdaContext;
  // What earlier platforms left on moto's queue is not this one's.
  const fresh = aws.takeAll();
  let batches = 0;
  return {
    async deliver(messages) {
      await fresh;
      // One batch as the event source mapping hands it over (the test is the poller).
      batches++;
      await handler(
        {
          Records: messages.map((body, i) => ({
            eventSource: "aws:sqs",
            messageId: `chaos-${batches}-${i}`,
            receiptHandle: `chaos-${batches}-${i}`,
            body: JSON.stringify(body),
            attributes: { ApproximateReceiveCount: "1" },
            messageAttributes: {},
          })),
        },
        context,
      );
    },
    // Every message sent to the queue since the last call, delayed or not (their delay is not
    // waited for).
    async drain() {
      await fresh;
      return aws.takeAll();
    },
    close: async () => undefined,
  };
}

const platforms: Array<[string, () => Platform]> = [
  ["Node host work queue", nodeHost],
  ["Workers queue consumer", workers],
  ["Lambda SQS batches", lambda],
];

function managed(namespace: string, name: string, cloudInit: string): Proxy {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace },
    spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: cloudInit } },
  } as Proxy;
}

async function newNamespace(): Promise<string> {
  const name = `queue-${randomBytes(3).toString("hex")}`;
  namespaces.push(name);
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  await optInNamespace(admin, name);
  return name;
}

/** Delivers follow-ups as they come (early: delays are not waited out) until all converged. */
async function driveToConvergence(
  platform: Platform,
  namespace: string,
  expected: Map<string, string>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { pending, leaks } = await findProblems(admin, namespace, expected);
    if (pending.length === 0 && leaks.length === 0) return;
    if (Date.now() > deadline) throw new Error(`not converged: ${[...leaks, ...pending].join("; ")}`);
    await new Promise((r) => setTimeout(r, 500));
    const next = await platform.drain();
    if (next.length > 0) await platform.deliver(next);
    else {
      // Nothing in flight (the Workers and Lambda doubles deliver only what was sent): a drift
      // pass, as the sweep would send.
      await platform.deliver(
        [...expected.keys()].map((name) => ({ request: request(namespace, name), attempt: 0 })),
      );
    }
  }
}

const request = (namespace: string, name: string) => ({ controller: "proxy", namespace, name });

describe.each(platforms)("queue faults: %s", (_, makePlatform) => {
  it("a message twice in a batch and the batch redelivered: converges with one instance", async () => {
    const platform = makePlatform();
    try {
      const ns = await newNamespace();
      await admin.create(proxyResource, managed(ns, "twice", "#cloud-config v1"));
      const m: PassMessage = { request: request(ns, "twice"), attempt: 0 };
      await platform.deliver([m, m]);
      await platform.deliver([m, m]);
      await driveToConvergence(platform, ns, new Map([["twice", "#cloud-config v1"]]));
    } finally {
      await platform.close();
    }
  }, 90_000);

  it("messages for a deleted object, delivered after it was recreated under the same name, never touch the new one", async () => {
    const platform = makePlatform();
    try {
      const ns = await newNamespace();
      const first = await admin.create<Proxy>(proxyResource, managed(ns, "reborn", "#cloud-config v1"));
      const listed = await listAll<Proxy>(admin, proxyResource, { namespace: ns });
      const now = new Date();
      const [freshSnapshot] = planSweep({
        controller: "proxy",
        objects: listed,
        now,
        resyncSeconds: 60,
        shardSize: 10,
      }).shards.flat();
      expect(freshSnapshot?.uid).toBe(first.metadata.uid);
      const lateSnapshot: PassMessage = {
        ...freshSnapshot!,
        listedAt: now.getTime() - (LISTED_MAX_AGE_SECONDS + 30) * 1000,
      };
      const lateFollowUp: PassMessage = {
        request: request(ns, "reborn"),
        attempt: 1,
        uid: first.metadata.uid!,
      };

      await admin.delete(proxyResource, { namespace: ns, name: "reborn" });
      const reborn = await admin.create<Proxy>(proxyResource, managed(ns, "reborn", "#cloud-config v2"));
      expect(reborn.metadata.uid).not.toBe(first.metadata.uid);

      const stale = [lateFollowUp, lateSnapshot, freshSnapshot!, lateFollowUp];
      await platform.deliver(stale);
      await platform.deliver(stale);
      // What those passes sent on (a Conflict's immediate requeue) is stale too: deliver it.
      await new Promise((r) => setTimeout(r, 300));
      const sentOn = await platform.drain();
      for (const m of sentOn) expect(m.kind !== "job" && m.uid).toBe(first.metadata.uid);
      if (sentOn.length > 0) await platform.deliver(sentOn);

      const now2 = await admin.get<Proxy>(proxyResource, { namespace: ns, name: "reborn" });
      expect(now2.metadata.uid).toBe(reborn.metadata.uid);
      expect(now2.metadata.resourceVersion).toBe(reborn.metadata.resourceVersion);
      expect(now2.metadata.finalizers ?? []).toEqual([]);
      expect(now2.status).toBeUndefined();
      const pods = await listAll(admin, Resources.Pod, { namespace: ns });
      expect(pods.map((p) => p.metadata.name)).toEqual([]);

      // The new object's own event (a key, no UID) converges it, with one instance of its own.
      await platform.deliver([{ request: request(ns, "reborn"), attempt: 0 }]);
      await driveToConvergence(platform, ns, new Map([["reborn", "#cloud-config v2"]]));
      const [pod, ...more] = await listAll(admin, Resources.Pod, { namespace: ns });
      expect(more).toEqual([]);
      expect(pod?.metadata.labels?.["crawl.kubefn.dev/proxy-uid"]).toBe(reborn.metadata.uid);
    } finally {
      await platform.close();
    }
  }, 90_000);
});
