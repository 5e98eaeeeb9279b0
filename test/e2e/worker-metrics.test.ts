/**
 * The Worker's metrics in workerd: a queue batch of full probe messages (the consumer's
 * `max_batch_size`, read from wrangler.toml, × the Proxies one 64 KB message carries, at most
 * `PROBE_SHARD_SIZE`) writes far fewer Analytics
 * Engine data points than the platform's 250 per invocation, and what they count adds up to the
 * probes the target saw. The local Analytics Engine binding discards what it is given, so the
 * Worker runs wrapped in a counting stand-in (test/e2e/metrics-standin/worker.ts) that, like the
 * platform, refuses a 251st point, and logs each invocation's points. An intake request (fetch)
 * writes its figures too, once answered.
 *
 * The External Proxies (a few hundred) exist in the devcluster (their health counters are written as in
 * production); their probes go through a loopback forward proxy to a loopback target.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { MAX_MESSAGE_BYTES, queuesPort, type WorkerEnv } from "../../functions/cloudflare/index.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import type { Kube, KubeObject } from "../../shared/kube/index.ts";
import {
  ENVELOPE_VERSION,
  type Message,
  messageAuthenticatorFrom,
  messageBytes,
} from "../../shared/runtime/index.ts";
import { eventually } from "../setup/cluster.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { workerCluster } from "../support/worker-cluster.ts";

const root = new URL("../../", import.meta.url).pathname;
const namespace = `worker-metrics-${Math.random().toString(36).slice(2, 8)}`;
const PLATFORM_LIMIT = 250;
/** The Worker's STATUS_SEAL_KEY: it keys the MAC on the probe shards' objects. */
const statusSealKey = crypto.randomUUID();

/** A figure of a wrangler config, as `key = value` or `KEY = "value"` on a line of its own. */
function figure(path: string, key: string): number {
  const m = new RegExp(`^${key}\\s*=\\s*"?(\\d+)"?\\s*$`, "m").exec(readFileSync(`${root}${path}`, "utf8"));
  if (!m) throw new Error(`${path} has no ${key}`);
  return Number(m[1]);
}
const shardSize = figure("wrangler.toml", "PROBE_SHARD_SIZE");
const batchSize = figure("wrangler.toml", "max_batch_size");

interface Point {
  indexes?: string[];
  blobs?: string[];
  doubles?: number[];
}
interface Written {
  handler: string;
  refused: number;
  points: Point[];
}

let kube: Kube;
let harness: TestHarness;
let forwardProxy: ForwardProxy;
let target: Target;

beforeAll(async () => {
  const { httpProxy, workerToken, kube: admin } = await workerCluster(namespace, { optIn: false });
  kube = admin;
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "test/e2e/metrics-standin/wrangler.toml",
        vars: { KUBE_SERVER: httpProxy, PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS },
        // STATUS_SEAL_KEY keys the MAC on the probe shards' objects (without it: no shards).
        secrets: { KUBE_TOKEN: workerToken, STATUS_SEAL_KEY: statusSealKey },
      },
    ],
  });
  await harness.listen();
}, 180_000);

afterAll(async () => {
  try {
    // No pass ran (no finalizer was put on): the Proxies go with their namespace.
    if (kube) await removeNamespaces(kube, [namespace], { dropFinalizers: true });
  } finally {
    await harness?.close();
    await Promise.all([forwardProxy?.close(), target?.close()]);
  }
}, 180_000);

/** What the stand-in logged: one entry per invocation. */
function written(): Written[] {
  return harness.getLogs().flatMap((l) => {
    try {
      const line = JSON.parse(l.message) as Written & { msg?: string };
      return line.msg === "analytics engine stand-in" ? [line] : [];
    } catch {
      return [];
    }
  });
}

/** The sum of `doubles[i]` over the points of `name`. */
const total = (points: readonly Point[], name: string, i = 0) =>
  points.filter((p) => p.blobs?.[0] === name).reduce((n, p) => n + (p.doubles?.[i] ?? 0), 0);

describe("the Worker's metrics on Analytics Engine", () => {
  it("the stand-in runs the root config's batch and shard sizes", () => {
    expect(figure("test/e2e/metrics-standin/wrangler.toml", "PROBE_SHARD_SIZE")).toBe(shardSize);
    expect(figure("test/e2e/metrics-standin/wrangler.toml", "max_batch_size")).toBe(batchSize);
  });

  it("an intake request writes its figures once it is answered", async () => {
    harness.clearLogs();
    const res = await harness.fetch("/v1/events", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(401);
    const fetched = await eventually(async () => written().find((w) => w.handler === "fetch"), {
      what: "the fetch invocation's points",
    });
    expect(fetched.points).toEqual([
      {
        indexes: ["kubefn_intake_rejected_total"],
        blobs: ["kubefn_intake_rejected_total", "reason=Unauthenticated", "counter"],
        doubles: [1, 1, 1, 1],
      },
    ]);
  });

  it(`a queue batch of ${batchSize} full probe messages writes at most ${PLATFORM_LIMIT} points, and they count every probe`, async () => {
    const create = (name: string) =>
      kube.create<ProxyObject & KubeObject>(proxyResource, {
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { name, namespace },
        spec: {
          mode: "External",
          endpoint: { host: "127.0.0.1", port: forwardProxy.port, scheme: "http" },
          healthCheck: {
            probeURL: `http://127.0.0.1:${target.port}/`,
            expectedStatus: 200,
            intervalSeconds: 30,
            timeoutSeconds: 5,
            // No verdict flips at the first probe: the batch's writes are its health counters.
            successThreshold: 3,
            failureThreshold: 3,
          },
        },
      } as ProxyObject & KubeObject);
    // The Proxies as a list returns them (no managedFields).
    const asListed = ({
      metadata: { managedFields: _, ...metadata },
      ...rest
    }: ProxyObject & KubeObject) => ({
      ...rest,
      metadata,
    });
    // A full message: as many of these Proxies as one message the Worker sends carries with their
    // MACs (the queue cuts a shard at MAX_MESSAGE_BYTES, 64 KB), at most a shard.
    const first = await create("m-0");
    const perObject = Buffer.byteLength(JSON.stringify(asListed(first))) + 64 + 16;
    const perMessage = Math.min(shardSize, Math.floor((MAX_MESSAGE_BYTES - 2_048) / perObject));
    const count = batchSize * perMessage;
    const rest = await mapWithConcurrency(
      Array.from({ length: count - 1 }, (_, i) => `m-${i + 1}`),
      16,
      create,
    );
    // The shards as the sweep sends them, due now, through the Worker's own producer port.
    const listed = [first, ...rest].map(asListed);
    const unsigned: Message[] = Array.from({ length: batchSize }, (_, s) => ({
      kind: "job",
      v: ENVELOPE_VERSION,
      job: {
        controller: "proxy",
        task: "probe",
        slot: `0-${s}`,
        objects: listed.slice(s * perMessage, (s + 1) * perMessage),
        due: Date.now(),
      },
    }));
    const env = await harness.getWorker<WorkerEnv>().getEnv();

    // Attack first (issue 30): the same shards put on the queue by a producer without kubefn's key
    // are refused in workerd: not one probe, each refusal logged.
    harness.clearLogs();
    const before = target.hits;
    await queuesPort(env.KUBEFN_QUEUE).send(unsigned);
    const refusals = () =>
      harness.getLogs().filter((l) => l.message.includes("job's objects do not carry kubefn's MAC")).length;
    await eventually(async () => (refusals() >= batchSize ? true : undefined), {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: "every unsigned shard refused",
    });
    expect(target.hits).toBe(before);

    // The shards as the sweep sends them: under kubefn's MAC.
    const mac = messageAuthenticatorFrom({ statusSealKey })!;
    const shards = await Promise.all(unsigned.map((m) => mac.sign(m)));
    // Each travels whole: the batch is `batchSize` messages.
    for (const shard of shards) expect(messageBytes(shard)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    harness.clearLogs();
    await queuesPort(env.KUBEFN_QUEUE).send(shards);

    // Done: every shard ran (latency confirmations come as later shards), and what the points
    // count has caught up with what the target saw, for a few seconds in a row.
    const jobs = () =>
      harness.getLogs().flatMap((l) => {
        try {
          const line = JSON.parse(l.message) as {
            msg?: string;
            task?: string;
            shard?: Record<string, number>;
          };
          return line.msg === "job" && line.task === "probe" ? [line] : [];
        } catch {
          return [];
        }
      });
    let quiet = 0;
    await eventually(
      async () => {
        // A refused point fails below at once (the platform would have thrown inside a shard).
        if (written().some((w) => w.refused > 0)) return true;
        const points = written().flatMap((w) => w.points);
        const caughtUp = jobs().length >= batchSize && total(points, "kubefn_probes_total") === target.hits;
        quiet = caughtUp ? quiet + 1 : 0;
        return quiet >= 10 ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500, what: "the shards' probes and their points" },
    ).catch((err) => {
      console.log(
        `target: ${target.hits} probes; the Worker's last lines:\n${harness
          .getLogs()
          .slice(-30)
          .map((l) => l.message.slice(0, 400))
          .join("\n")}`,
      );
      throw err;
    });

    const invocations = written();
    const batch = invocations.find((w) => w.handler === "queue");
    const all = invocations.flatMap((w) => w.points);
    const probed = jobs().reduce((n, j) => n + (j.shard?.probed ?? 0), 0);
    console.log(
      `worker metrics: ${invocations.length} invocations wrote ${invocations.map((w) => w.points.length).join(", ")} points; ` +
        `the batch of ${batchSize} shards: ${batch?.points.length} points, ` +
        `${Buffer.byteLength(JSON.stringify(batch?.points ?? []))} bytes as JSON; ` +
        `${target.hits} probes at the target, ${probed} in the job lines`,
    );
    for (const w of invocations) {
      expect(w.refused, `${w.handler}: points refused past ${PLATFORM_LIMIT}`).toBe(0);
      expect(w.points.length).toBeLessThanOrEqual(PLATFORM_LIMIT);
    }
    // The first queue invocation is the batch of 10 full shards, whole.
    expect(total(batch?.points ?? [], "kubefn_jobs_total")).toBe(batchSize);
    // What the points count is what happened: every probe, once, in two families.
    expect(target.hits).toBeGreaterThanOrEqual(count);
    expect(total(all, "kubefn_probes_total")).toBe(target.hits);
    expect(total(all, "kubefn_probe_duration_seconds", 1)).toBe(target.hits);
    expect(probed).toBe(target.hits);
    // No point names a Proxy.
    expect(JSON.stringify(all)).not.toMatch(/m-\d+|kubefn_proxy_probe_success|kubefn_proxy_last_probe/);
  }, 300_000);
});
