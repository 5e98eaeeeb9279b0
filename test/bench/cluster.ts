/**
 * Bench helpers shared by the cluster benches: one devcluster per `npm run bench` (started on
 * first use, stopped by `run.ts`), a namespace per bench, a Kube whose lists stay inside that
 * namespace (so one bench's sweep never sees another bench's Proxies), a recording queue, a quiet
 * context, and bounded-concurrency creation.
 */
import { randomBytes } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { type Devcluster, startDevcluster } from "../../functions/node/dev/devcluster.ts";
import { installCrdsAndRbac, trustAsKubefn } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { type CountingTransport, countingTransport, createKube, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import type { Kube, KubeObject, Resource, Transport } from "../../shared/kube/port.ts";
import type { Clock, Context, Message, Queue } from "../../shared/runtime/index.ts";

export interface BenchCluster {
  devcluster: Devcluster;
  kubeconfig: string;
  kc: KubeConfig;
  /** Admin access, not counted: the bench's own setup (creating objects, reading results). */
  admin: Kube;
  /** A fresh counted transport (admin credentials) for the code under measurement. */
  counted(): CountingTransport;
}

let shared: Promise<BenchCluster> | undefined;

/** The run's devcluster with kubefn's CRDs and RBAC installed; started on first call. */
export function benchCluster(): Promise<BenchCluster> {
  shared ??= (async () => {
    const devcluster = await startDevcluster();
    try {
      const kc = loadKubeConfig({ file: devcluster.info.kubeconfig });
      const admin = createKube(createNodeTransport(kc), { fieldManager: "kubefn-bench" });
      await installCrdsAndRbac(admin);
      // The code under measurement runs with the admin's credentials (see `counted`).
      await trustAsKubefn(admin, "devcluster-admin", "admin");
      return {
        devcluster,
        kubeconfig: devcluster.info.kubeconfig,
        kc,
        admin,
        counted: () => countingTransport(createNodeTransport(kc)),
      };
    } catch (err) {
      await devcluster.stop();
      throw err;
    }
  })();
  return shared;
}

/** Stops the devcluster if one was started (even when it failed half-way). */
export async function stopBenchCluster(): Promise<void> {
  if (!shared) return;
  const pending = shared;
  shared = undefined;
  try {
    await (await pending).devcluster.stop();
  } catch {
    // It never came up: startDevcluster already killed it.
  }
}

export async function createNamespace(admin: Kube, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  return name;
}

/** The Kube port over `transport`, with every list confined to `namespace`. */
export function namespacedKube(transport: Transport, namespace: string): Kube {
  const kube = createKube(transport, { fieldManager: "kubefn" });
  return { ...kube, list: (res, opts) => kube.list(res, { ...opts, namespace }) };
}

/** Creates `objects` with at most `concurrency` requests in flight; resolves with the wall time. */
export async function createMany(
  kube: Kube,
  res: Resource,
  objects: KubeObject[],
  concurrency = 32,
): Promise<{ ms: number }> {
  const t0 = performance.now();
  await mapWithConcurrency(objects, concurrency, (o) => kube.create(res, o));
  return { ms: performance.now() - t0 };
}

export interface SentMessage {
  message: Message;
  delaySeconds: number;
  /** Clock time the message was sent at, ms. */
  at: number;
}

/** A queue that only records: the bench delivers (or not) what was sent. */
export interface RecordingQueue extends Queue {
  sent: SentMessage[];
}

export function recordingQueue(clock: Clock): RecordingQueue {
  const sent: SentMessage[] = [];
  return {
    sent,
    async send(messages, delaySeconds = 0) {
      const at = clock.now().getTime();
      for (const message of messages) sent.push({ message, delaySeconds, at });
    },
  };
}

/** A clock the bench moves by hand. */
export interface FakeClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
}

export function fakeClock(startMs: number): FakeClock {
  let t = startMs;
  return {
    now: () => new Date(t),
    set: (ms) => {
      t = ms;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/** A context that logs nothing but counts error lines (a bench whose passes fail says so). */
export function benchContext(kube: Kube, queue: Queue, clock: Clock): Context & { errors: string[] } {
  const errors: string[] = [];
  const noop = () => {};
  return {
    kube,
    queue,
    clock,
    log: {
      info: noop,
      warn: noop,
      error: (msg, fields) => errors.push(`${msg} ${JSON.stringify(fields ?? {})}`),
    },
    metrics: { count: noop, observe: noop, gauge: noop },
    random: Math.random,
    errors,
  };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  everyMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** One row of the bench table. */
export interface BenchRow {
  name: string;
  figure: number | string;
  unit: string;
  note?: string;
}
