/**
 * `npm run bench -- lambda-memory`: the memory the Lambda reconcile function needs at 10,000
 * objects (9,000 External Proxies probed every 30 s through 4 local forward proxies, 1,000
 * SubPools; `KUBEFN_BENCH_LAMBDA_MEMORY_OBJECTS=<n>` for another size, in the same mix), measured
 * as the peak resident set (`VmHWM`) of the process that runs it: functions/aws/handler.ts bundled
 * as the release bundles it (esbuild, `index.mjs`), its `reconcile` export run by
 * test/support/lambda-runtime.mjs with `--enable-source-maps` (the template's `NODE_OPTIONS`),
 * against the devcluster, with moto's SQS as the reconcile queue (`AWS_ENDPOINT_URL`) and the
 * template's `PROBE_SHARD_SIZE` and sweep period.
 *
 * Two processes, as two instances would be:
 * - **the sweep**: one Scheduled Event — the first sweep of a fresh instance, which lists every
 *   Proxy and SubPool (pages) and sends every object's pass and a minute of probe shards; then
 *   the peak is reset (`/proc/<pid>/clear_refs`) and the next minute's sweep is measured alone;
 * - **the probes**: the queue polled as Lambda's event source mapping polls it (10 messages at
 *   most, one batch at a time) for the probe shards of both sweeps, each batch one invocation. The
 *   sweep's pass messages are taken off the queue and not run (10,000 first passes are converging,
 *   not the steady state this sizes): only probe shards reach this process.
 * Each figure is printed beside the memory size the template sets.
 *
 * Caveats: the peak of a process whose heap may grow as it likes (V8 collects lazily when memory
 * is plentiful) is at most what the function needs; Lambda's own runtime client adds a few MB.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { bundleLambdaHandler } from "../../scripts/release.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { Resources } from "../../shared/kube/index.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import { expandedBody } from "../../shared/runtime/index.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { createKubefnAws, REGION, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { type BenchRow, benchCluster, createMany, createNamespace, round } from "./cluster.ts";
import { startFixtures } from "./sweep.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const _run = promisify(execFile);
const PROXY_SHARE = 0.9;

/** The template's reconcile settings this bench runs with. */
async function templateSettings(): Promise<{ memoryMb: number; shardSize: number; periodSeconds: number }> {
  const template = await readFile(join(root, "infra/aws/template.yaml"), "utf8");
  const memoryMb = Number(/MemorySize:\n\s+Type: Number\n\s+Default: (\d+)/.exec(template)?.[1]);
  const shardSize = Number(/PROBE_SHARD_SIZE: "(\d+)"/.exec(template)?.[1]);
  const periodSeconds = Number(/SWEEP_PERIOD_SECONDS: "(\d+)"/.exec(template)?.[1]);
  if (!memoryMb || !shardSize || !periodSeconds)
    throw new Error("infra/aws/template.yaml: no MemorySize, PROBE_SHARD_SIZE or SWEEP_PERIOD_SECONDS");
  return { memoryMb, shardSize, periodSeconds };
}

/** One function instance: the bundle's `reconcile` in its own process. */
interface Instance {
  invoke(event: unknown): Promise<unknown>;
  /** Peak and current resident set, MiB (`VmHWM`, `VmRSS`). */
  memory(): Promise<{ peakMb: number; rssMb: number }>;
  /** Resets the peak to the current resident set. */
  resetPeak(): Promise<void>;
  stop(): Promise<void>;
  log(): string;
}

/**
 * The heap limits Lambda's Node.js runtime starts node with for a memory size (its bootstrap: a
 * tenth for the young generation, half of that a semi-space, the rest the old generation), so
 * that V8 collects as it would on Lambda rather than growing into a large machine's memory.
 */
export function lambdaNodeFlags(memoryMb: number): string[] {
  const newSpace = Math.floor(memoryMb / 10);
  return [`--max-semi-space-size=${Math.floor(newSpace / 2)}`, `--max-old-space-size=${memoryMb - newSpace}`];
}

async function startInstance(codeDir: string, env: Record<string, string>): Promise<Instance> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...lambdaNodeFlags(Number(env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE)),
      "--enable-source-maps",
      join(root, "test/support/lambda-runtime.mjs"),
      codeDir,
      "index.reconcile",
    ],
    { stdio: ["ignore", "pipe", "pipe"], env },
  );
  let out = "";
  const append = (c: string) => {
    out = (out + c).slice(-100_000);
  };
  child.stdout?.setEncoding("utf8").on("data", append);
  child.stderr?.setEncoding("utf8").on("data", append);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 30_000;
  let port = 0;
  while (!port) {
    if (child.exitCode !== null) throw new Error(`the function exited (${child.exitCode}):\n${out}`);
    if (Date.now() > deadline) throw new Error(`the function did not listen:\n${out}`);
    port = Number(/\{"listening":(\d+)\}/.exec(out)?.[1] ?? 0);
    if (!port) await new Promise((r) => setTimeout(r, 100));
  }
  const status = `/proc/${child.pid}/status`;
  return {
    async invoke(event) {
      // node:http, not fetch: a first sweep against moto takes minutes, beyond fetch's 300 s.
      const text = await new Promise<string>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port, method: "POST", path: "/" }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end(JSON.stringify(event));
      });
      const answer = JSON.parse(text) as { result?: unknown; error?: string };
      if (answer.error) throw new Error(`invocation failed: ${answer.error}`);
      return answer.result;
    },
    async memory() {
      const text = await readFile(status, "utf8");
      const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1]);
      return { peakMb: kb("VmHWM") / 1024, rssMb: kb("VmRSS") / 1024 };
    },
    resetPeak: () => writeFile(`/proc/${child.pid}/clear_refs`, "5"),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
    log: () => out,
  };
}

function externalProxy(
  namespace: string,
  i: number,
  ports: { target: number; proxies: number[] },
): KubeObject {
  return {
    apiVersion: `${proxyResource.group}/${proxyResource.version}`,
    kind: "Proxy",
    metadata: { namespace, name: `ext-${i}` },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: ports.proxies[i % ports.proxies.length]!, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${ports.target}/healthz`, intervalSeconds: 30 },
    },
  };
}

function subPool(prefix: string, i: number): KubeObject {
  return {
    apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
    kind: "SubPool",
    metadata: { name: `${prefix}-${i}` },
    spec: {
      exposure: { mode: "Internal" },
      storage: { size: "1Gi" },
      cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "100m", memory: "64Mi" } } },
      cpaManager: {
        image: "ghcr.io/subrelay/cpa-manager:1.4.0",
        resources: { requests: { cpu: "50m", memory: "32Mi" } },
      },
    },
  };
}

const scheduledEvent = (time: Date) => ({
  version: "0",
  id: crypto.randomUUID(),
  "detail-type": "Scheduled Event",
  source: "aws.events",
  account: "123456789012",
  time: time.toISOString(),
  region: REGION,
  resources: [],
  detail: {},
});

export async function benchLambdaMemory(): Promise<BenchRow[]> {
  const objects = Number(process.env.KUBEFN_BENCH_LAMBDA_MEMORY_OBJECTS ?? 10_000);
  const proxies = Math.round(objects * PROXY_SHARE);
  const subPools = objects - proxies;
  const settings = await templateSettings();
  // The size whose heap limits the processes run with: the template's unless another is asked.
  const memoryMb = Number(process.env.KUBEFN_BENCH_LAMBDA_MEMORY_MB ?? settings.memoryMb);
  const cluster = await benchCluster();
  const fixtures = await startFixtures(4);
  const moto = await startMoto();
  const codeDir = await mkdtemp(join(tmpdir(), "kubefn-lambda-memory-"));
  const instances: Instance[] = [];
  const prefix = `lm-${Date.now().toString(36)}`;
  let namespace: string | undefined;
  let aws: Awaited<ReturnType<typeof createKubefnAws>> | undefined;
  try {
    aws = await createKubefnAws(moto.endpoint);
    namespace = await createNamespace(cluster.admin, "bench-lambda-memory");
    const ns = namespace;
    const created = await createMany(
      cluster.admin,
      proxyResource,
      Array.from({ length: proxies }, (_, i) => externalProxy(ns, i, fixtures.ports)),
      32,
    );
    const createdPools = await createMany(
      cluster.admin,
      subPoolResource,
      Array.from({ length: subPools }, (_, i) => subPool(prefix, i)),
      32,
    );
    process.stderr.write(
      `lambda-memory: created ${proxies} Proxies in ${round(created.ms / 1000)} s, ${subPools} SubPools in ${round(createdPools.ms / 1000)} s\n`,
    );
    await bundleLambdaHandler(join(codeDir, "index.mjs"));
    const env = {
      PATH: process.env.PATH ?? "",
      ...TEST_CREDENTIALS,
      AWS_REGION: REGION,
      AWS_ENDPOINT_URL: moto.endpoint,
      AWS_LAMBDA_FUNCTION_NAME: "kubefn-reconcile",
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(memoryMb),
      KUBECONFIG_BASE64: Buffer.from(await readFile(cluster.kubeconfig, "utf8")).toString("base64"),
      QUEUE_URL: aws.queueUrl,
      STATUS_SEAL_KEY: "lambda-memory-bench-seal-key-0123456789",
      SWEEP_PERIOD_SECONDS: String(settings.periodSeconds),
      PROBE_SHARD_SIZE: String(settings.shardSize),
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
      LOG_LEVEL: "warn",
    };
    const sweeper = await startInstance(codeDir, env);
    instances.push(sweeper);
    const prober = await startInstance(codeDir, env);
    instances.push(prober);
    const idle = await sweeper.memory();

    // The first sweep of a fresh instance: every object's pass, a minute of probe shards.
    const firstAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    const t0 = performance.now();
    await sweeper.invoke(scheduledEvent(firstAt));
    const firstMs = performance.now() - t0;
    const first = await sweeper.memory();
    await sweeper.resetPeak();
    // Its 10,000 first passes are converging, not the steady state sized here, and its shards are
    // late by the time they were all sent: off the queue, so that the next sweep's shards are
    // received when they are due.
    await aws.purge();

    // The probes: the queue polled by one poller, probe shards only, each batch one invocation.
    let polling = true;
    const probe = { invocations: 0, shards: 0, passesDropped: 0, maxBatch: 0, failed: 0 };
    const hitsBefore = await fixtures.hits();
    const queue = aws;
    let pollError: unknown;
    const poller = (async () => {
      while (polling) {
        const delivered = await queue.delivered();
        if (delivered.length === 0) {
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        const records = delivered.flatMap((e) => e.Records);
        const kinds = await Promise.all(
          records.map(async (r) => {
            const m = (await expandedBody(JSON.parse(r.body))) as { job?: { task?: string } };
            return m.job?.task === "probe";
          }),
        );
        const shards = records.filter((_, i) => kinds[i]);
        probe.passesDropped += records.length - shards.length;
        for (let i = 0; i < shards.length; i += 10) {
          const batch = shards.slice(i, i + 10);
          probe.maxBatch = Math.max(probe.maxBatch, batch.length);
          probe.shards += batch.length;
          probe.invocations++;
          const answer = (await prober.invoke({ Records: batch })) as { batchItemFailures: unknown[] };
          probe.failed += answer.batchItemFailures.length;
        }
      }
    })().catch((err: unknown) => {
      pollError = err;
    });

    // A steady sweep (an instance's later one), scheduled a period less a second from now, as
    // EventBridge's event may arrive early: a sweep slowed by this machine still sends every shard
    // before it is due, and the probe invocations see each second's shard when it is due.
    const next = new Date(Math.floor(Date.now() / 1000) * 1000 + (settings.periodSeconds - 1) * 1000);
    const t1 = performance.now();
    await sweeper.invoke(scheduledEvent(next));
    const secondMs = performance.now() - t1;
    const second = await sweeper.memory();
    await new Promise((r) =>
      setTimeout(r, next.getTime() + settings.periodSeconds * 1000 + 5_000 - Date.now()),
    );
    polling = false;
    await poller;
    if (pollError) throw pollError;
    const probes = (await fixtures.hits()) - hitsBefore;
    const probed = await prober.memory();
    const json = {
      bench: "lambda-memory",
      objects,
      proxies,
      subPools,
      memorySizeMb: memoryMb,
      templateMemorySizeMb: settings.memoryMb,
      shardSize: settings.shardSize,
      idleMb: round(idle.peakMb),
      firstSweep: { peakMb: round(first.peakMb), ms: Math.round(firstMs) },
      nextSweep: { peakMb: round(second.peakMb), ms: Math.round(secondMs) },
      probes: { peakMb: round(probed.peakMb), rssMb: round(probed.rssMb), probes, ...probe },
    };
    process.stderr.write(`${JSON.stringify(json)}\n`);
    const peak = Math.max(first.peakMb, second.peakMb, probed.peakMb);
    const note = `${proxies} Proxies + ${subPools} SubPools on the devcluster; the release bundle's reconcile in its own process (VmHWM), node's heap limits as Lambda's runtime sets them at ${memoryMb} MB`;
    return [
      {
        name: "lambda-memory idle",
        figure: round(idle.peakMb),
        unit: "MiB peak RSS",
        note: "the bundle loaded, no invocation",
      },
      {
        name: "lambda-memory first sweep",
        figure: round(first.peakMb),
        unit: "MiB peak RSS",
        note: `a fresh instance's first sweep (every object's pass, a minute of probe shards), ${Math.round(firstMs)} ms; ${note}`,
      },
      {
        name: "lambda-memory next sweep",
        figure: round(second.peakMb),
        unit: "MiB peak RSS",
        note: `the next minute's sweep, peak reset before it, ${Math.round(secondMs)} ms`,
      },
      {
        name: "lambda-memory probes",
        figure: round(probed.peakMb),
        unit: "MiB peak RSS",
        note: `${probe.invocations} invocations of up to ${probe.maxBatch} shards (${probe.shards} shards, ${probes} probes, ${probe.failed} reported failed; ${probe.passesDropped} pass messages not run)`,
      },
      {
        name: "lambda-memory peak",
        figure: round(peak),
        unit: "MiB",
        note: `${round((peak / memoryMb) * 100)} % of ${memoryMb} MB (the template's MemorySize: ${settings.memoryMb} MB)`,
      },
    ];
  } finally {
    for (const i of instances) {
      if (process.env.KUBEFN_BENCH_LAMBDA_MEMORY_LOG === "1") process.stderr.write(i.log());
      await i.stop();
    }
    aws?.close();
    await Promise.all([fixtures.stop(), moto.close(), rm(codeDir, { recursive: true, force: true })]);
    if (namespace) await cluster.admin.delete(Resources.Namespace, { name: namespace }).catch(() => {});
    await mapWithConcurrency(
      Array.from({ length: subPools }, (_, i) => `${prefix}-${i}`),
      32,
      (name) => cluster.admin.delete(subPoolResource, { name }).catch(() => {}),
    );
  }
}
