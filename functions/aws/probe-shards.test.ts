/**
 * Health probes on Lambda fan out as probe shards (PROBE_SHARD_SIZE, 40 by default): the sweep
 * puts the shards due now on the bus and schedules the later ones with EventBridge Scheduler, each
 * carrying its Proxies; when a schedule runs, the function probes them. Against moto's server
 * (bus events routed by the template's Reconcile rule, schedules read back with GetSchedule),
 * the production handler and prober, and a real forward proxy and target on loopback.
 */

import type { LambdaContext } from "hono/aws-lambda";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { SweepSummary } from "../../shared/app/sweep.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { probeShardTask } from "../../shared/controllers/proxy/health-task.ts";
import { probeDelays } from "../../shared/health/index.ts";
import type { KubeObject } from "../../shared/kube/index.ts";
import type { Message } from "../../shared/runtime/index.ts";
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
  EVENT_BUS_NAME: "kubefn",
  SCHEDULE_GROUP: "kubefn",
  SCHEDULER_ROLE_ARN: "arn:aws:iam::111122223333:role/kubefn-scheduler",
  KUBECONFIG_BASE64: Buffer.from("unused: the kube port is given").toString("base64"),
  // The forward proxy and the targets are loopback fixtures.
  PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
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
  await aws.delivered();
  await aws.fire();
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
      healthCheck: { probeURL: `http://127.0.0.1:${target.port}/${name}`, intervalSeconds },
    },
  };
}

function handlerOver(kube: FakeKube, env: Record<string, string> = ENV) {
  return createHandler({
    env,
    endpoint: moto.endpoint,
    kube: () => kube,
    clock: { now: () => NOW },
    log: silent,
    metrics: noMetrics,
  });
}

const shardNames = (messages: Message[]) =>
  messages.flatMap((m) => (m.shard?.objects ?? []).map((o) => o.metadata.name as string));
const probedNames = (since: number) =>
  forward.requests.slice(since).map((url) => new URL(url).pathname.slice(1));
const tally = (names: string[]) => {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (out[n] ?? 0) + 1;
  return out;
};

describe("Lambda probe shards through EventBridge and Scheduler (moto)", () => {
  it("a 30 s Proxy is in two shards 30 s apart, a 60 s one in one; each shard arrives with its Proxies and probes them", async () => {
    const kube = new FakeKube();
    const thirty = ["t1", "t2", "t3"];
    const sixty = ["m1", "m2"];
    for (const name of thirty) kube.seed(proxyResource, externalProxy(name, 30));
    for (const name of sixty) kube.seed(proxyResource, externalProxy(name, 60));
    const handler = handlerOver(kube);
    const before = forward.requests.length;

    const summary = (await handler(sweepEvent, lambdaContext)) as SweepSummary;
    expect(summary.tasks["proxy-health"]).toMatchObject({ planned: 8 });
    // The sweep itself probes nothing: it only sends shards.
    expect(forward.requests.length).toBe(before);

    const onBus = await aws.delivered();
    const held = await aws.schedules();
    const sent = [
      ...onBus.flatMap((e) => e.detail.messages),
      ...held.flatMap((s) => s.input.detail.messages),
    ];
    // (Beside the shards, each new Proxy gets a drift pass: it has no status yet.)
    const shards = sent.filter((m) => m.shard);
    expect(shards.every((m) => m.shard?.task === probeShardTask && m.trigger?.kind === "shard")).toBe(true);
    expect(tally(shardNames(shards))).toEqual({ t1: 2, t2: 2, t3: 2, m1: 1, m2: 1 });
    // Every shard due later is a one-time schedule within this minute, targeting the function.
    expect(held.length).toBeGreaterThan(0);
    for (const s of held) {
      expect(s.output).toMatchObject({
        ActionAfterCompletion: "DELETE",
        Target: { Arn: lambdaContext.invokedFunctionArn },
      });
      const at = Date.parse(`${/^at\((.+)\)$/.exec(s.expression)?.[1]}Z`);
      expect(at - NOW.getTime()).toBeGreaterThan(0);
      expect(at - NOW.getTime()).toBeLessThan(60_000);
    }
    // A 30 s Proxy's two shards are 30 s apart.
    const dueOf = (name: string) =>
      held
        .filter((s) => shardNames(s.input.detail.messages).includes(name))
        .map((s) => Date.parse(`${/^at\((.+)\)$/.exec(s.expression)?.[1]}Z`));
    for (const name of thirty) {
      const due = dueOf(name);
      if (due.length === 2) expect(Math.abs(due[1]! - due[0]!)).toBe(30_000);
      else expect(due).toHaveLength(1); // its other shard was due at once and went on the bus
    }

    // The function receives the bus events now and each schedule's input when it runs.
    for (const event of onBus) await handler(event, lambdaContext);
    for (const s of await aws.fire()) await handler(s.input, lambdaContext);
    const probed = tally(probedNames(before));
    for (const name of thirty) expect(probed[name]).toBeGreaterThanOrEqual(2);
    for (const name of sixty) expect(probed[name]).toBeGreaterThanOrEqual(1);
    expect(Object.keys(probed).sort()).toEqual([...thirty, ...sixty].sort());
    expect(target.hits).toBeGreaterThanOrEqual(8);
    expect(await aws.schedules()).toEqual([]);
  }, 30_000);

  it("a shard too large for one schedule input is cut into several, every Proxy in exactly one", async () => {
    const kube = new FakeKube();
    // 40 Proxies of ~9 KB at one phase of the minute: their one shard would be ~360 KB.
    const phase = (name: string) => probeDelays({ namespace: "crawl", name }, 60, NOW, 60)[0];
    const names = Array.from({ length: 4000 }, (_, i) => `big${i}`)
      .filter((n) => phase(n) === 7)
      .slice(0, 40);
    expect(names).toHaveLength(40);
    for (const name of names) kube.seed(proxyResource, externalProxy(name, 60, 9_000));
    const handler = handlerOver(kube, { ...ENV, PROBE_SHARD_SIZE: "40" });
    await handler(sweepEvent, lambdaContext);
    const onBus = await aws.delivered();
    const held = await aws.fire();
    const inputs = [
      ...onBus.map((e) =>
        JSON.stringify({ source: e.source, "detail-type": e["detail-type"], detail: e.detail }),
      ),
      ...held.map((s) => s.output.Target?.Input ?? ""),
    ];
    expect(inputs.length).toBeGreaterThanOrEqual(2);
    // Each within kubefn's budget per input, under the platform's 256 KB.
    for (const input of inputs) expect(Buffer.byteLength(input)).toBeLessThan(MAX_CALL_BYTES);
    const messages = [
      ...onBus.flatMap((e) => e.detail.messages),
      ...held.flatMap((s) => s.input.detail.messages),
    ];
    expect(shardNames(messages).sort()).toEqual([...names].sort());
    const requestNames = messages.map((m) => m.request.name);
    expect(new Set(requestNames).size).toBe(requestNames.length);
  }, 30_000);
});
