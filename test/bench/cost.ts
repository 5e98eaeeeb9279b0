/**
 * `npm run bench -- cost`: the monthly bill per 10,000 objects on Workers and on Lambda (SQS
 * carrying its messages; 0.1.0's EventBridge Scheduler beside it), beside an always-on pod, from
 * the prices in `prices-2025.json` and `cost-model.ts`; and per object at 100 and 1,000 objects.
 * It fails (exit 1) when a bill per 10,000 objects exceeds its goal (`GOALS`).
 *
 * Measured here, on each platform's consumer path: one second of the fleet's probing — the
 * Proxies due in one second (9,000 every 30 s: 300; at 1,000 objects 30; at 100, 3), as the
 * sweep would send them: shards of the platform's `PROBE_SHARD_SIZE` carrying each Proxy's
 * probe view, fitted to the queue's declared limit, carried as the platform's queue port sends
 * them (gzipped where smaller: `carriedBodies`) — delivered as one batch and expanded as its
 * consumer expands them:
 * - Lambda: the production handler (`createHandler`) given one SQS event of those records, with
 *   its JSON log and EMF metrics counted in lines and bytes, the distinct metric × dimension sets
 *   it writes, and its wall time (Lambda bills duration) and CPU time;
 * - Workers: `createKubefn` with the Worker's settings (`parseWorkerEnv`, `PROBE_CONCURRENCY` 6)
 *   consuming the batch as the Worker's `queue` handler does, with its Analytics Engine points
 *   counted. Its CPU time is then replaced by workerd's per probe, measured on the Worker's own
 *   queue path against the devcluster (`workerd-probe-cpu.ts`); Node's is printed beside it.
 * With `KUBEFN_BENCH_COST_WORKERD=<file>` (a worker-probes run's output), Workers' CPU per probe is
 * workerd's from that run instead, and no Worker is started here.
 * Each is run five times; the third is measured (steady: the first wrote every verdict; warm), its
 * CPU time the least of the last three.
 *
 * Taken from the benches' results, not measured here: passes per object-hour and the share of
 * extra probes (latency confirmations) from a fleet bench's JSON line when
 * `KUBEFN_BENCH_COST_FLEET=<file>` names a file holding it (`npm run bench -- fleet`'s last line),
 * else the figures in `cost-inputs.json` (each with its source: a bench and commit, or "assumed").
 *
 * Scaled to the fleet bench's mix (90 % External Proxies probed every 30 s, the rest SubPools),
 * which the output says.
 */
import { readFileSync } from "node:fs";
import { CreateQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { LambdaContext } from "hono/aws-lambda";
import { createHandler } from "../../functions/aws/handler.ts";
import { MAX_SHARD_BYTES } from "../../functions/aws/queue.ts";
import { createEmfMetrics } from "../../functions/aws/telemetry.ts";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import {
  MAX_MESSAGE_BYTES as WORKERS_MAX_MESSAGE_BYTES,
  MAX_SHARD_BYTES as WORKERS_MAX_SHARD_BYTES,
} from "../../functions/cloudflare/queue.ts";
import { createAnalyticsMetrics } from "../../functions/cloudflare/telemetry.ts";
import { createKubefn, createLineLog } from "../../shared/app/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyControllerName } from "../../shared/controllers/proxy/controller.ts";
import { proxyProbeView } from "../../shared/controllers/proxy/health-subject.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/index.ts";
import {
  bodyBytes,
  carriedBodies,
  ENVELOPE_VERSION,
  expandedBody,
  fitToQueue,
  type Message,
  messageAuthenticatorFrom,
  type PassMessage,
} from "../../shared/runtime/index.ts";

import { FakeKube } from "../support/fake-kube.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import {
  type Bill,
  type FleetCounts,
  LAMBDA_MB_PER_VCPU,
  lambdaBill,
  monthlyVolumes,
  type Prices,
  podBill,
  stateChangesBill,
  type UnitCost,
  workersBill,
} from "./cost-model.ts";
import { startFixtures } from "./sweep.ts";
import { measureWorkerdProbeCpu, type WorkerdProbeCpu } from "./workerd-probe-cpu.ts";

/** A message as a platform queue carries it: itself, or gzipped (`carriedBodies`). */
type CarriedBody = Awaited<ReturnType<typeof carriedBodies>>[number];

const OBJECTS = 10_000;
const PROXY_SHARE = 0.9;
const INTERVAL_SECONDS = 30;
/** The bills per 10,000 objects a month this bench holds each platform to (issue 32). */
export const GOALS = { Workers: 10, "Lambda (SQS)": 15 } as const;

interface Inputs {
  passesPerObjectHour: { value: number; source: string };
  confirmationShare: { value: number; source: string };
  pass: UnitCost & { source: string };
  sweepPer1000: UnitCost & { source: string };
  sqsIdlePollsPerMonth: { value: number; source: string };
}

type Platform = "workers" | "lambda";

/**
 * The platforms' `STATUS_SEAL_KEY`: a shard on a platform queue carries kubefn's MAC keyed from it,
 * and a consumer refuses one without (the bench seals its shards as the sweep does).
 */
const SEAL_KEY = "cost-bench-seal-key-0123456789abcdef";
const shardMac = messageAuthenticatorFrom({ statusSealKey: SEAL_KEY })!;

/**
 * Each platform's settings as deployed (wrangler.toml, infra/aws/template.yaml): the shard size,
 * the JSON the core cuts a job at, and the most a body may take on the queue once its port has
 * gzipped it (`carriedBodies`, as `queuesPort` and `sqsQueue` do).
 */
function platformSettings(platform: Platform): {
  shardSize: number;
  maxMessageBytes: number;
  maxCarriedBytes: number;
} {
  if (platform === "workers") {
    const toml = readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8");
    const shardSize = Number(/^PROBE_SHARD_SIZE = "(\d+)"/m.exec(toml)?.[1]);
    if (!shardSize) throw new Error("wrangler.toml sets no PROBE_SHARD_SIZE");
    return {
      shardSize,
      maxMessageBytes: WORKERS_MAX_SHARD_BYTES,
      maxCarriedBytes: WORKERS_MAX_MESSAGE_BYTES,
    };
  }
  const template = readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8");
  const shardSize = Number(/PROBE_SHARD_SIZE: "?(\d+)"?/.exec(template)?.[1] ?? 40);
  return { shardSize, maxMessageBytes: MAX_SHARD_BYTES, maxCarriedBytes: MAX_SHARD_BYTES };
}

export interface SecondMeasure {
  platform: Platform;
  proxies: number;
  shards: number;
  /** One invocation (the batch of one second's shards): what it cost. */
  invocation: UnitCost;
  /** Each shard message's bytes, as the queue counts them. */
  shardBytes: number[];
  /** Distinct CloudWatch metrics (name × dimension values) the invocation wrote (Lambda). */
  customMetrics: string[];
  probes: number;
}

/** Where Lambda's handler sends what a shard passes on (its health reports): moto's SQS. */
export interface LambdaQueue {
  endpoint: string;
  queueUrl: string;
}

/** A queue in moto's SQS for the Lambda handler's sends. */
export async function lambdaQueueAt(endpoint: string): Promise<LambdaQueue> {
  const sqs = new SQSClient({
    region: "us-east-1",
    endpoint,
    credentials: { accessKeyId: "bench", secretAccessKey: "bench" },
  });
  const queue = await sqs.send(new CreateQueueCommand({ QueueName: "kubefn-cost" }));
  sqs.destroy();
  return { endpoint, queueUrl: queue.QueueUrl as string };
}

/**
 * One second of probing on `platform`'s consumer path, measured at its third (steady) run.
 * Lambda's handler sends to `lambdaQueue` (moto's SQS): a queue that refuses its health reports
 * keeps every Proxy unconverged, and every second then writes every status again.
 */
export async function measureSecond(
  platform: Platform,
  proxies: number,
  fixtures: Awaited<ReturnType<typeof startFixtures>>,
  lambdaQueue?: LambdaQueue,
): Promise<SecondMeasure> {
  const { shardSize, maxMessageBytes, maxCarriedBytes } = platformSettings(platform);
  const { target, proxies: ports } = fixtures.ports;
  const kube = new FakeKube();
  for (let i = 0; i < proxies; i++)
    kube.seed(proxyResource, externalProxy(i, ports[i % ports.length]!, target));
  const tally = {
    lines: 0,
    bytes: 0,
    emfLines: 0,
    emfBytes: 0,
    points: 0,
    lost: 0,
    metrics: new Set<string>(),
  };
  const write = (line: string) => {
    tally.lines++;
    tally.bytes += Buffer.byteLength(line) + 1;
    if (line.includes('"msg":"health reports not sent')) tally.lost++;
  };
  const log = createLineLog("json", write);
  const emf = createEmfMetrics({
    write: (document: string) => {
      tally.emfLines++;
      tally.emfBytes += Buffer.byteLength(document) + 1;
      const o = JSON.parse(document) as {
        _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
      } & Record<string, unknown>;
      for (const directive of o._aws.CloudWatchMetrics)
        for (const dims of directive.Dimensions)
          for (const { Name: name } of directive.Metrics)
            tally.metrics.add(`${name}${dims.map((d) => `|${d}=${o[d]}`).join("")}`);
    },
  });
  const analytics = createAnalyticsMetrics({
    writeDataPoint: () => {
      tally.points++;
    },
  } as unknown as Parameters<typeof createAnalyticsMetrics>[0]);
  const clock = { now: () => new Date() };
  // The shards one sweep sends for this second: probe views, in shards of the platform's size,
  // fitted to its queue's limit, sealed as the runtime seals them, and carried as the platform's
  // port sends them (gzipped where that is smaller).
  const shardsNow = async (): Promise<CarriedBody[]> => {
    const listed = (await kube.list(proxyResource, { namespace: "bench" })).items;
    const messages: Message[] = [];
    for (let i = 0; i < listed.length; i += shardSize) {
      messages.push({
        kind: "job",
        job: {
          controller: proxyControllerName,
          task: "probe",
          slot: `0-${i}`,
          objects: listed.slice(i, i + shardSize).map(proxyProbeView),
          due: Date.now(),
        },
      });
    }
    const signed = await Promise.all(
      fitToQueue(messages, maxMessageBytes).map((m) => shardMac.sign({ ...m, v: ENVELOPE_VERSION })),
    );
    return (await Promise.all(signed.map((m) => carriedBodies(m, maxCarriedBytes)))).flat();
  };
  let consume: (messages: CarriedBody[]) => Promise<unknown>;
  if (platform === "lambda") {
    if (!lambdaQueue) throw new Error("Lambda's second needs a queue (lambdaQueueAt)");
    const handler = createHandler({
      env: {
        AWS_REGION: "us-east-1",
        QUEUE_URL: lambdaQueue.queueUrl,
        KUBECONFIG_BASE64: Buffer.from("unused: the kube port is given").toString("base64"),
        PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
        AWS_ACCESS_KEY_ID: "bench",
        AWS_SECRET_ACCESS_KEY: "bench",
        STATUS_SEAL_KEY: SEAL_KEY,
      },
      endpoint: lambdaQueue.endpoint,
      kube: () => kube,
      clock,
      log,
      metrics: emf,
    });
    consume = (messages) =>
      handler(
        {
          Records: messages.map((m, i) => ({
            eventSource: "aws:sqs",
            messageId: `m${i}`,
            receiptHandle: `r${i}`,
            body: JSON.stringify(m),
            attributes: { ApproximateReceiveCount: "1" },
          })),
        },
        lambdaContext,
      );
  } else {
    const config = parseWorkerEnv({
      KUBE_SERVER: "https://kube.example.com",
      KUBE_TOKEN: "unused",
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
      PROBE_SHARD_SIZE: String(shardSize),
      STATUS_SEAL_KEY: SEAL_KEY,
    });
    const kubefn = createKubefn(config, {
      kube,
      queue: { send: async () => {}, maxMessageBytes },
      prober: createNodeProber(),
      clock,
      log,
      metrics: analytics,
    });
    consume = async (messages) => {
      // As the Worker's `queue` handler: bodies expanded, one consume per batch, one metrics flush.
      const verdicts = await kubefn.consume(
        await Promise.all(messages.map(async (body) => ({ body: await expandedBody(body), attempts: 1 }))),
      );
      analytics.flush();
      return verdicts;
    };
  }
  // Unmeasured: the first run writes every verdict; the second warms the code up, as a platform's
  // instance is warm after its first invocations.
  await consume(await shardsNow());
  await consume(await shardsNow());
  const messages = await shardsNow();
  Object.assign(tally, { lines: 0, bytes: 0, emfLines: 0, emfBytes: 0, points: 0, lost: 0 });
  tally.metrics.clear();
  const hitsBefore = await fixtures.hits();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await consume(messages);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const probes = (await fixtures.hits()) - hitsBefore;
  // A second whose shards were refused or shed probes nothing and costs almost nothing: a bill
  // from it would be a bill for no work.
  if (tally.lost > 0)
    throw new Error(
      `${platform}: ${tally.lost} shard(s) lost health reports in the measured second (the queue refused them)`,
    );
  if (probes < proxies)
    throw new Error(
      `${platform}: ${probes} probes in the measured second for ${proxies} Proxies due (refused or shed shards: see the log lines)`,
    );
  const counted = { ...tally, metrics: [...tally.metrics].sort() };
  // The CPU of two more runs alike (their log and metric tallies are not kept): the least of
  // three, since other processes on a shared machine only ever add to it.
  let cpuMs = (cpu.user + cpu.system) / 1000;
  for (let i = 0; i < 2; i++) {
    const again = await shardsNow();
    const c1 = process.cpuUsage();
    await consume(again);
    const used = process.cpuUsage(c1);
    cpuMs = Math.min(cpuMs, (used.user + used.system) / 1000);
  }
  return {
    platform,
    proxies,
    shards: messages.length,
    invocation: {
      cpuMs,
      wallMs,
      logLines: counted.lines,
      logBytes: counted.bytes,
      metricPoints: platform === "workers" ? counted.points : counted.emfLines,
      metricBytes: counted.emfBytes,
    },
    shardBytes: messages.map(bodyBytes),
    customMetrics: counted.metrics,
    probes,
  };
}

/**
 * The CloudWatch metrics (name × dimension values) a steady sweep and steady passes write, through
 * the platform-neutral core with Lambda's EMF metrics: a sweep over `proxies` converged Proxies
 * (planning their shards into a queue that keeps them) and a drift pass of each of ten.
 */
export async function measureSweepAndPassMetrics(
  proxies: number,
): Promise<{ metrics: string[]; changes: { converging: number; steady: number; steadyPasses: number } }> {
  const kube = new FakeKube();
  /** The state changes published, by phase: the port as a platform binds it, counting. */
  const changes = { converging: 0, steady: 0, steadyPasses: 10 };
  let phase: "converging" | "steady" = "converging";
  for (let i = 0; i < proxies; i++) kube.seed(proxyResource, externalProxy(i, 9, 9));
  const metrics = new Set<string>();
  const emf = createEmfMetrics({
    write: (document: string) => {
      const o = JSON.parse(document) as {
        _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
      } & Record<string, unknown>;
      for (const directive of o._aws.CloudWatchMetrics)
        for (const dims of directive.Dimensions)
          for (const { Name: name } of directive.Metrics)
            metrics.add(`${name}${dims.map((d) => `|${d}=${o[d]}`).join("")}`);
    },
  });
  const config = parseWorkerEnv({
    KUBE_SERVER: "https://kube.example.com",
    KUBE_TOKEN: "unused",
    PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
  });
  const kubefn = createKubefn(config, {
    kube,
    queue: { send: async () => {} },
    prober: createNodeProber(),
    log: createLineLog("json", () => {}),
    metrics: emf,
    stateChanges: {
      async publish(published) {
        changes[phase] += published.length;
      },
    },
  });
  const passes = (trigger: PassMessage["trigger"]) =>
    kubefn.consume(
      Array.from({ length: 10 }, (_, i) => ({
        body: {
          v: ENVELOPE_VERSION,
          request: { controller: proxyControllerName, namespace: "bench", name: `ext-${i}` },
          attempt: 0,
          trigger,
        },
      })),
    );
  // Converge first (unmeasured): the first passes write status; then the steady ones.
  await passes({ kind: "start" });
  await kubefn.sweep();
  emf.flush();
  metrics.clear();
  phase = "steady";
  await kubefn.sweep();
  emf.flush();
  await passes({ kind: "drift", reason: "resync" });
  emf.flush();
  return { metrics: [...metrics].sort(), changes };
}

const lambdaContext = {
  functionName: "kubefn",
  functionVersion: "$LATEST",
  invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn",
  memoryLimitInMB: "256",
  awsRequestId: "cost",
  logGroupName: "/aws/lambda/kubefn",
  logStreamName: "cost",
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 60_000,
} satisfies LambdaContext;

function externalProxy(i: number, port: number, target: number): KubeObject {
  return {
    apiVersion: `${proxyResource.group}/${proxyResource.version}`,
    kind: "Proxy",
    metadata: { namespace: "bench", name: `ext-${i}`, uid: `uid-${i}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${target}/`, successThreshold: 1 },
    },
  };
}

/**
 * workerd's CPU ms per probe from a worker-probes bench's JSON line (`KUBEFN_BENCH_COST_WORKERD=<file>`):
 * the workerd process's CPU in the window over the probes the target saw. An upper bound: that
 * process also runs miniflare's queue broker and the Worker's cron sweeps and API requests.
 */
function workerdCpu(file: string | undefined): { msPerProbe: number; source: string } | undefined {
  if (!file) return undefined;
  const line = readFileSync(file, "utf8")
    .split("\n")
    .find((l) => l.startsWith('{"bench":"worker-probes"'));
  if (!line) throw new Error(`${file} holds no worker-probes bench JSON line`);
  const r = JSON.parse(line) as {
    proxies: number;
    probeShardSize: number;
    probesPerMinute: number;
    cpuSecondsPerMinute: Record<string, number>;
  };
  const key = Object.keys(r.cpuSecondsPerMinute).find((k) => k.includes("workerd"));
  if (!key || !r.probesPerMinute) throw new Error(`${file}: no workerd CPU or no probes in the window`);
  return {
    msPerProbe: (r.cpuSecondsPerMinute[key]! * 1000) / r.probesPerMinute,
    source: `worker-probes bench: workerd's CPU over ${r.proxies} Proxies in shards of ${r.probeShardSize}, ${r.probesPerMinute} probes a minute`,
  };
}

/** Passes per object-hour and extra probes from a fleet bench's JSON line, where given. */
function fromFleet(file: string | undefined, inputs: Inputs): Inputs {
  if (!file) return inputs;
  const line = readFileSync(file, "utf8")
    .split("\n")
    .find((l) => l.startsWith('{"bench":"fleet"'));
  if (!line) throw new Error(`${file} holds no fleet bench JSON line`);
  const f = JSON.parse(line) as {
    commit: string;
    primaries: { proxies: number };
    steady: { kubefn: { passMessagesPerObjectHour: number; probesPerMinute: number } };
  };
  const due = f.primaries.proxies * 2;
  const source = `fleet bench, commit ${f.commit}, ${f.primaries.proxies} Proxies`;
  return {
    ...inputs,
    passesPerObjectHour: { value: f.steady.kubefn.passMessagesPerObjectHour, source },
    confirmationShare: { value: Math.max(0, f.steady.kubefn.probesPerMinute / due - 1), source },
  };
}

export interface CostResult {
  rows: BenchRow[];
  json: Record<string, unknown>;
  /** Set when a bill exceeds its goal: the bench fails with it. */
  failure?: string;
}

/** The fleet of `objects` in the fleet bench's mix, with the measured seconds of each platform. */
function countsFor(
  objects: number,
  inputs: Inputs,
  second: SecondMeasure,
  customMetrics: number,
  lambdaMemoryMb: number,
): FleetCounts {
  return {
    objects,
    proxies: objects * PROXY_SHARE,
    probeIntervalSeconds: INTERVAL_SECONDS,
    confirmationShare: inputs.confirmationShare.value,
    passesPerObjectHour: inputs.passesPerObjectHour.value,
    sweepsPerHour: 60,
    second: {
      proxies: second.proxies,
      shards: second.shards,
      shardBytes: second.shardBytes,
      invocation: second.invocation,
    },
    passesPerInvocation: 10,
    pass: inputs.pass,
    sweepPer1000: inputs.sweepPer1000,
    customMetrics,
    sqsIdlePollsPerMonth: inputs.sqsIdlePollsPerMonth.value,
    lambdaMemoryMb,
  };
}

/** infra/aws/template.yaml's MemorySize default. */
function templateMemoryMb(): number {
  const template = readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8");
  const m = /MemorySize:\n\s+Type: Number\n\s+Default: (\d+)/.exec(template);
  if (!m) throw new Error("infra/aws/template.yaml has no MemorySize default");
  return Number(m[1]);
}

export async function benchCost(): Promise<CostResult> {
  const prices = JSON.parse(readFileSync(new URL("./prices-2025.json", import.meta.url), "utf8")) as Prices;
  const inputs = fromFleet(
    process.env.KUBEFN_BENCH_COST_FLEET,
    JSON.parse(readFileSync(new URL("./cost-inputs.json", import.meta.url), "utf8")) as Inputs,
  );
  const memoryMb = templateMemoryMb();
  const sizes = [100, 1_000, OBJECTS];
  const fixtures = await startFixtures(4);
  const moto = await startMoto();
  // The SDK's default chain reads its credentials from the process's environment (as on Lambda).
  const saved = Object.keys(TEST_CREDENTIALS).map((k) => [k, process.env[k]] as const);
  Object.assign(process.env, TEST_CREDENTIALS);
  const measured: Record<string, SecondMeasure> = {};
  let workerdMeasured: WorkerdProbeCpu | undefined;
  try {
    const lambdaQueue = await lambdaQueueAt(moto.endpoint);
    for (const objects of sizes) {
      const perSecond = Math.max(1, Math.round((objects * PROXY_SHARE) / INTERVAL_SECONDS));
      for (const platform of ["workers", "lambda"] as const) {
        measured[`${platform}-${objects}`] = await measureSecond(platform, perSecond, fixtures, lambdaQueue);
      }
    }
    if (!process.env.KUBEFN_BENCH_COST_WORKERD) {
      const { shardSize, maxMessageBytes, maxCarriedBytes } = platformSettings("workers");
      workerdMeasured = await measureWorkerdProbeCpu({
        proxiesPerSecond: measured[`workers-${OBJECTS}`]!.proxies,
        ports: fixtures.ports,
        hits: fixtures.hits,
        sealKey: SEAL_KEY,
        shardSize,
        maxMessageBytes,
        maxCarriedBytes,
        seconds: 15,
      });
    }
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await Promise.all([fixtures.stop(), moto.close()]);
  }
  // Workers' CPU per probe measured in workerd (here, or from a worker-probes run when one is
  // given): it replaces Node's figure for the Worker's invocations.
  const nodeMsPerProbe =
    measured[`workers-${OBJECTS}`]!.invocation.cpuMs / Math.max(1, measured[`workers-${OBJECTS}`]!.probes);
  const workerd = workerdMeasured
    ? {
        msPerProbe: workerdMeasured.msPerProbe,
        source: `measured in workerd: the Worker's queue handler given ${round(workerdMeasured.seconds, 1)} s of ${measured[`workers-${OBJECTS}`]!.proxies} Proxies a second, ${workerdMeasured.probes} probes (${workerdMeasured.extraProbes} beyond one per Proxy due), workerd ${round(workerdMeasured.activeCpuMs)} CPU ms less ${round(workerdMeasured.idleCpuMs)} idle; Node's ${round(nodeMsPerProbe, 3)} ms a probe in the same run`,
      }
    : workerdCpu(process.env.KUBEFN_BENCH_COST_WORKERD);
  if (workerd) {
    for (const [k, m] of Object.entries(measured))
      if (k.startsWith("workers-")) m.invocation = { ...m.invocation, cpuMs: workerd.msPerProbe * m.probes };
  }
  const { metrics: steadyMetrics, changes: measuredChanges } = await measureSweepAndPassMetrics(100);
  const billsAt = (objects: number) => {
    const w = measured[`workers-${objects}`]!;
    const l = measured[`lambda-${objects}`]!;
    const customMetrics = new Set([...l.customMetrics, ...steadyMetrics]).size;
    return [
      workersBill(countsFor(objects, inputs, w, 0, memoryMb), prices),
      lambdaBill(countsFor(objects, inputs, l, customMetrics, memoryMb), prices, "sqs"),
      lambdaBill(countsFor(objects, inputs, l, customMetrics, memoryMb), prices, "scheduler"),
    ];
  };
  const bills = billsAt(OBJECTS);
  const pod = podBill(prices);
  const w = measured[`workers-${OBJECTS}`]!;
  const l = measured[`lambda-${OBJECTS}`]!;
  const volumes = monthlyVolumes(countsFor(OBJECTS, inputs, w, 0, memoryMb));
  for (const b of bills) {
    process.stderr.write(`cost: ${b.platform} $${round(b.total, 2)} a month per ${OBJECTS} objects\n`);
    for (const line of b.lines)
      process.stderr.write(
        `cost:   ${line.item}: ${fmt(line.quantity)} ${line.unit} → $${round(line.dollars, 2)}\n`,
      );
  }
  process.stderr.write(
    `cost: the pod $${pod.low}–${pod.high} a month, whatever the fleet's size while it fits\n`,
  );
  // State changes: none at steady state (measured), so the bill is the changes themselves; priced
  // for a fleet where every Proxy has one health incident a day (Unhealthy, then Ready again).
  const changeBill = stateChangesBill(
    {
      perSteadyPass: measuredChanges.steady / measuredChanges.steadyPasses,
      passesPerMonth: volumes.passes,
      flippingProxies: OBJECTS * PROXY_SHARE,
      flipsPerProxyMonth: 30,
    },
    prices,
  );
  process.stderr.write(
    `cost: state changes: measured ${measuredChanges.converging} published converging 10 Proxies, ${measuredChanges.steady} by a steady sweep and ${measuredChanges.steadyPasses} steady passes; with one incident a day for each of ${fmt(OBJECTS * PROXY_SHARE)} Proxies, ${fmt(changeBill.events)} events a month: EventBridge $${round(changeBill.eventBridge, 2)}, Workers Queues $${round(changeBill.queues, 2)}, CloudEvents $0\n`,
  );
  const assumed = [
    `passes/object-hour ${inputs.passesPerObjectHour.value} (${inputs.passesPerObjectHour.source})`,
    `extra probes ${inputs.confirmationShare.value} (${inputs.confirmationShare.source})`,
    `a pass ${inputs.pass.cpuMs} CPU ms, ${inputs.pass.wallMs} wall ms (${inputs.pass.source})`,
    `a sweep per 1,000 objects ${inputs.sweepPer1000.cpuMs} CPU ms (${inputs.sweepPer1000.source})`,
    `${fmt(inputs.sqsIdlePollsPerMonth.value)} idle SQS polls (${inputs.sqsIdlePollsPerMonth.source})`,
  ];
  assumed.push(
    workerd
      ? `Workers CPU ${round(workerd.msPerProbe, 3)} ms a probe (${workerd.source})`
      : "Workers CPU: Node's, standing in for workerd's (KUBEFN_BENCH_COST_WORKERD=<file> takes a worker-probes run's)",
  );
  for (const a of assumed) process.stderr.write(`cost: assumed: ${a}\n`);
  process.stderr.write(
    `cost: measured: a steady sweep and steady drift passes write ${steadyMetrics.length} CloudWatch metrics: ${steadyMetrics.join(", ")}\n`,
  );
  for (const [k, m] of Object.entries(measured)) {
    const i = m.invocation;
    process.stderr.write(
      `cost: measured ${k}: ${m.proxies} Proxies in ${m.shards} shards of ${Math.round(Math.max(...m.shardBytes))} bytes at most, ${m.probes} probes: ${round(i.cpuMs, 1)} CPU ms (${round(i.cpuMs / Math.max(1, m.probes), 3)} a probe), ${round(i.wallMs, 0)} wall ms, ${i.logLines} log lines, ${i.metricPoints} metric points, ${m.customMetrics.length} CloudWatch metrics\n`,
    );
  }
  const perObject = sizes.map((objects) => {
    const [wb, lb] = billsAt(objects);
    return { objects, workers: wb!.total / objects, lambda: lb!.total / objects };
  });
  const scaled = `one second of probing measured on each platform's consumer path (${w.proxies} Proxies: Workers ${w.shards} shards, Lambda ${l.shards}), scaled to ${OBJECTS.toLocaleString("en")} objects (${(OBJECTS * PROXY_SHARE).toLocaleString("en")} Proxies every 30 s + ${(OBJECTS * (1 - PROXY_SHARE)).toLocaleString("en")} SubPools); prices ${prices.date}`;
  const top = (b: Bill) =>
    [...b.lines]
      .sort((a, c) => c.dollars - a.dollars)
      .slice(0, 3)
      .map((line) => `${line.item.split(" (")[0]} $${round(line.dollars, 2)}`)
      .join(", ");
  const goal = (b: Bill) => GOALS[b.platform as keyof typeof GOALS];
  const rows: BenchRow[] = [
    ...bills.map((b) => ({
      name: `cost ${b.platform}`,
      figure: round(b.total, 2),
      unit: "$/month per 10,000 objects",
      note: `${goal(b) === undefined ? "" : `goal ≤ $${goal(b)}; `}${top(b)}; ${scaled}`,
    })),
    ...perObject.map((r) => ({
      name: `cost per object at ${r.objects.toLocaleString("en")}`,
      figure: `${round(r.workers * 100, 2)} ¢ / ${round(r.lambda * 100, 2)} ¢`,
      unit: "Workers / Lambda (SQS) per object-month",
      note: `the pod: ${round((pod.low / r.objects) * 100, 2)}–${round((pod.high / r.objects) * 100, 2)} ¢ per object`,
    })),
    {
      name: "cost state changes",
      figure: `${round(changeBill.eventBridge, 2)} / ${round(changeBill.queues, 2)}`,
      unit: "$/month EventBridge / Workers Queues per 10,000 objects",
      note: `${measuredChanges.steady} published at steady state (measured); ${fmt(changeBill.events)} events a month if each of the ${fmt(OBJECTS * PROXY_SHARE)} Proxies has one health incident a day (Unhealthy, then Ready)`,
    },
    {
      name: "cost pod",
      figure: `${pod.low}–${pod.high}`,
      unit: "$/month",
      note: "an always-on controller pod (the Node host), whatever the fleet's size while it fits",
    },
    {
      name: "cost inputs",
      figure: round(w.invocation.cpuMs / Math.max(1, w.probes), 3),
      unit: `CPU ms per probe (Workers, ${workerd ? "workerd" : "Node"})`,
      note: `Lambda: ${round(l.invocation.wallMs, 0)} wall ms and ${round(l.invocation.cpuMs, 0)} CPU ms for ${l.probes} probes (CPU-bound below ${Math.round((l.invocation.cpuMs * LAMBDA_MB_PER_VCPU) / Math.max(1, l.invocation.wallMs))} MB; billed at ${memoryMb} MB); ${fmt(volumes.shards)} shards (${fmt(volumes.shardChunks)} billed 64 KB chunks) + ${fmt(volumes.passes)} passes a month; ${l.customMetrics.length} CloudWatch metrics from probing`,
    },
  ];
  const over = bills.filter((b) => goal(b) !== undefined && b.total > goal(b)!);
  const json = {
    bench: "cost",
    prices: { date: prices.date },
    objects: OBJECTS,
    proxies: OBJECTS * PROXY_SHARE,
    lambdaMemoryMb: memoryMb,
    workersCpuMsPerProbe: {
      node: round(nodeMsPerProbe, 4),
      ...(workerd ? { workerd: round(workerd.msPerProbe, 4) } : {}),
      ...(workerdMeasured ? { workerdWindow: workerdMeasured } : {}),
    },
    measured: Object.fromEntries(
      Object.entries(measured).map(([k, m]) => [
        k,
        {
          proxies: m.proxies,
          shards: m.shards,
          shardBytes: m.shardBytes,
          probes: m.probes,
          invocation: m.invocation,
          customMetrics: m.customMetrics,
        },
      ]),
    ),
    inputs,
    steadyMetrics,
    stateChanges: { measured: measuredChanges, ...changeBill },
    volumes,
    bills: Object.fromEntries(bills.map((b) => [b.platform, round(b.total, 2)])),
    goals: GOALS,
    perObject: perObject.map((r) => ({
      objects: r.objects,
      workers: round(r.workers, 5),
      lambda: round(r.lambda, 5),
    })),
    pod,
  };
  return {
    rows,
    json,
    ...(over.length > 0
      ? {
          failure: over
            .map((b) => `${b.platform} $${round(b.total, 2)} exceeds its goal of $${goal(b)}`)
            .join("; "),
        }
      : {}),
  };
}

function fmt(n: number): string {
  if (n >= 1e6) return `${round(n / 1e6, 2)} M`;
  if (n >= 1e3) return `${round(n / 1e3, 1)} k`;
  return String(round(n, 2));
}
