/**
 * Workers' CPU per probe, measured in workerd on the Worker's own path: the Worker (wrangler.toml,
 * bundled by wrangler, run by wrangler's dev server as its test harness runs it; with `profile`,
 * workerd's inspector on) is given probe shards on its own queue
 * (`KUBEFN_QUEUE.sendBatch`, as the cron sweep sends them), and its `queue` handler expands,
 * checks and probes them through `cloudflare:sockets` against the bench's local forward proxies
 * and target.
 *
 * workerd exposes no CPU time per request to local dev, so the figure is the workerd process's
 * own (/proc utime + stime, every workerd process the harness started) over a window in which
 * one second's shards are sent every second, less the same process's idle CPU over windows of
 * the same length just before and just after (no shard sent), divided by the probes the target
 * saw in the window. The Proxies are the devcluster's (the Worker reads its admission gate and
 * writes their health there, as the least-privileged `kubefn-system/kubefn`); each second's
 * shards are their probe views as listed then, sealed and carried as the sweep sends them, and
 * the window starts once they are converged (a warm-up of probing first).
 *
 * Caveats: the process also runs miniflare's local queue broker (one message a second here) and
 * the harness's proxy, so the figure is at most what the Worker's invocations use, never less;
 * a shared machine only adds to it. Probes beyond one per Proxy due (confirmations of a latency
 * change, jittery on a loaded machine) are counted among the probes.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";
import { serviceAccountToken } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyControllerName } from "../../shared/controllers/proxy/controller.ts";
import { proxyProbeView } from "../../shared/controllers/proxy/health-subject.ts";
import { type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import {
  carriedBodies,
  ENVELOPE_VERSION,
  fitToQueue,
  type Message,
  messageAuthenticatorFrom,
} from "../../shared/runtime/index.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { benchCluster, createNamespace } from "./cluster.ts";
import { type PhaseRule, type ProfileBreakdown, profileBreakdown, startProfiling } from "./cpu-profile.ts";
import { cpuMsOf } from "./proc.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface WorkerdProbeCpu {
  msPerProbe: number;
  probes: number;
  seconds: number;
  /** workerd's CPU ms in the window, and the idle CPU ms over a window as long (the mean of two). */
  activeCpuMs: number;
  idleCpuMs: number;
  /** Probes beyond one per Proxy due in the window: confirmations. */
  extraProbes: number;
  /**
   * With `profile`: a second window as long, the Worker's isolate sampled by V8's profiler — its
   * busy ms per probe and their phases, beside workerd's /proc CPU per probe in that window
   * (raised by the sampling itself).
   */
  profiled?: {
    probes: number;
    isolateMsPerProbe: number;
    procMsPerProbe: number;
    breakdown: ProfileBreakdown;
  };
}

/** The pids of every `workerd` process descended from this one. */
function workerdPids(): number[] {
  const parents = new Map<number, { ppid: number; comm: string }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const raw = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = raw.lastIndexOf(")");
      parents.set(Number(entry), {
        ppid: Number(raw.slice(close + 2).split(" ")[1]),
        comm: raw.slice(raw.indexOf("(") + 1, close),
      });
    } catch {
      // Exited while listed.
    }
  }
  const descends = (pid: number): boolean => {
    for (let p = parents.get(pid)?.ppid; p !== undefined && p > 1; p = parents.get(p)?.ppid)
      if (p === process.pid) return true;
    return false;
  };
  return [...parents].filter(([pid, s]) => s.comm.includes("workerd") && descends(pid)).map(([pid]) => pid);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs the Worker in workerd and measures its CPU per probe over `seconds` seconds of probing
 * `proxiesPerSecond` External Proxies a second (each through one of `ports.proxies` to
 * `ports.target`), in shards of `shardSize` fitted and carried within the queue's limits and
 * sealed with `sealKey`; `hits()` counts the probes the target has seen.
 */
export async function measureWorkerdProbeCpu(opts: {
  proxiesPerSecond: number;
  ports: { target: number; proxies: number[] };
  hits: () => Promise<number>;
  sealKey: string;
  shardSize: number;
  maxMessageBytes: number;
  maxCarriedBytes: number;
  seconds: number;
  /** Profile a second window: V8's sampling interval, and the phases to sum the samples by. */
  profile?: { intervalUs: number; phases: readonly PhaseRule[]; out?: string };
}): Promise<WorkerdProbeCpu> {
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, "bench-cost-workerd");
  const objects: KubeObject[] = Array.from({ length: opts.proxiesPerSecond }, (_, i) => ({
    apiVersion: `${proxyResource.group}/${proxyResource.version}`,
    kind: "Proxy",
    metadata: { namespace: ns, name: `ext-${i}` },
    spec: {
      mode: "External",
      endpoint: {
        host: "127.0.0.1",
        port: opts.ports.proxies[i % opts.ports.proxies.length]!,
        scheme: "http",
      },
      healthCheck: { probeURL: `http://127.0.0.1:${opts.ports.target}/`, successThreshold: 1 },
    },
  }));
  await mapWithConcurrency(objects, 32, (o) => cluster.admin.create(proxyResource, o));
  const mac = messageAuthenticatorFrom({ statusSealKey: opts.sealKey })!;
  /** This second's shards: the Proxies as listed now, as the sweep sends them. */
  const nextSecond = async () => {
    const listed = (await cluster.admin.list(proxyResource, { namespace: ns })).items;
    const messages: Message[] = [];
    for (let i = 0; i < listed.length; i += opts.shardSize)
      messages.push({
        kind: "job",
        job: {
          controller: proxyControllerName,
          task: "probe",
          slot: `0-${i}`,
          objects: listed.slice(i, i + opts.shardSize).map(proxyProbeView),
          due: Date.now(),
        },
      });
    const signed = await Promise.all(
      fitToQueue(messages, opts.maxMessageBytes).map((m) => mac.sign({ ...m, v: ENVELOPE_VERSION })),
    );
    return (await Promise.all(signed.map((m) => carriedBodies(m, opts.maxCarriedBytes)))).flat();
  };
  const logs: string[] = [];
  // wrangler's dev server, as the test harness starts it (which cannot turn workerd's inspector
  // on): the bundle as deployed, or unminified with `profile` (the profile names functions).
  const worker = await unstable_startWorker({
    config: `${root}wrangler.toml`,
    bindings: {
      KUBE_SERVER: { type: "plain_text", value: cluster.devcluster.info.httpProxy },
      PROBE_ALLOWED_CIDRS: { type: "plain_text", value: LOOPBACK_PROBE_CIDRS },
      KUBE_TOKEN: {
        type: "secret_text",
        value: await serviceAccountToken(createNodeTransport(cluster.kc), "kubefn-system", "kubefn"),
      },
      STATUS_SEAL_KEY: { type: "secret_text", value: opts.sealKey },
    },
    ...(opts.profile ? { build: { minify: false } } : {}),
    dev: {
      server: { hostname: "127.0.0.1", port: 0 },
      inspector: opts.profile ? { hostname: "127.0.0.1", port: 0 } : false,
      watch: false,
      persist: false,
      logLevel: "none",
      structuredLogsHandler: (l: { message: string }) => {
        logs.push(l.message);
        if (logs.length > 1000) logs.splice(0, 500);
      },
    },
  } as Parameters<typeof unstable_startWorker>[0]);
  try {
    await worker.ready;
    // The dev server's Miniflare (as the test harness reads it), set once its runtime is up.
    const runtime = (worker.raw as unknown as { runtimes: { mf?: { getBindings(): Promise<unknown> } }[] })
      .runtimes[0]!;
    for (const until = Date.now() + 60_000; !runtime.mf && Date.now() < until; ) await sleep(100);
    if (!runtime.mf) throw new Error("workerd: the dev server's runtime did not start");
    const env = (await runtime.mf.getBindings()) as {
      KUBEFN_QUEUE: { sendBatch(m: { body: unknown }[]): Promise<void> };
    };
    const pids = workerdPids();
    if (pids.length === 0) throw new Error("no workerd process under this one");
    const cpu = () => pids.reduce((sum, pid) => sum + cpuMsOf(pid), 0);
    const send = async () => env.KUBEFN_QUEUE.sendBatch((await nextSecond()).map((body) => ({ body })));
    /** Sends one second's shards every second for `n` seconds, then waits for their probes. */
    const probe = async (n: number) => {
      const before = await opts.hits();
      for (let i = 0; i < n; i++) {
        const at = Date.now();
        await send();
        await sleep(Math.max(0, 1000 - (Date.now() - at)));
      }
      const deadline = Date.now() + 30_000;
      while ((await opts.hits()) - before < n * opts.proxiesPerSecond && Date.now() < deadline)
        await sleep(100);
      // The last invocation's tail: its metrics flush, its answer to the broker, its passes.
      await sleep(1000);
    };
    const idle = async (ms: number) => {
      const c0 = cpu();
      await sleep(ms);
      return cpu() - c0;
    };
    // Converged and warm (unmeasured): the first probes write every Proxy's health and its passes
    // make it Ready; the isolate is built and its code compiled.
    await probe(10);
    const idleBefore = await idle(opts.seconds * 1000 + 1000);
    const h0 = await opts.hits();
    const t0 = performance.now();
    const c0 = cpu();
    await probe(opts.seconds);
    const activeCpuMs = cpu() - c0;
    const windowMs = performance.now() - t0;
    const probes = (await opts.hits()) - h0;
    const idleAfter = await idle(windowMs);
    const idleCpuMs = ((idleBefore * windowMs) / (opts.seconds * 1000 + 1000) + idleAfter) / 2;
    let profiled: WorkerdProbeCpu["profiled"];
    if (opts.profile) {
      const inspector = await worker.inspectorUrl;
      if (!inspector) throw new Error("workerd: no inspector");
      const session = await startProfiling(`ws://${inspector.host}/ws`, opts.profile.intervalUs);
      const h1 = await opts.hits();
      const c1 = cpu();
      const t1 = performance.now();
      await probe(opts.seconds);
      const cpuMs = cpu() - c1;
      const ms = performance.now() - t1;
      const profile = await session.stop();
      // The raw profile, for DevTools' Performance panel or a closer look.
      if (opts.profile.out) writeFileSync(opts.profile.out, JSON.stringify(profile));
      const breakdown = profileBreakdown(profile, opts.profile.phases);
      const n = (await opts.hits()) - h1;
      profiled = {
        probes: n,
        isolateMsPerProbe: breakdown.busyMs / n,
        procMsPerProbe: (cpuMs - (idleCpuMs * ms) / windowMs) / n,
        breakdown,
      };
      // Before the checks below: a loaded machine's profile is still worth reading.
      console.log(JSON.stringify({ workerdProfile: profiled }));
    }
    const errors = logs.filter((l) => /"level":"error"/.test(l));
    if (errors.length > 0)
      throw new Error(`workerd: ${errors.length} error lines, e.g. ${errors[0]!.slice(0, 300)}`);
    if (probes < opts.seconds * opts.proxiesPerSecond)
      throw new Error(
        `workerd: ${probes} probes for ${opts.seconds * opts.proxiesPerSecond} due; the Worker's last lines: ${logs
          .slice(-3)
          .map((l) => l.slice(0, 400))
          .join(" | ")}`,
      );
    return {
      msPerProbe: (activeCpuMs - idleCpuMs) / probes,
      probes,
      seconds: windowMs / 1000,
      activeCpuMs,
      idleCpuMs,
      extraProbes: probes - opts.seconds * opts.proxiesPerSecond,
      ...(profiled ? { profiled } : {}),
    };
  } finally {
    await worker.dispose().catch(() => undefined);
    await cluster.admin.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
  }
}
