/**
 * `npm run bench -- worker-probes`: health probes of a large fleet on Cloudflare Workers, in
 * workerd. The Worker (wrangler.toml, bundled by wrangler, run by wrangler's test harness with
 * miniflare's local queues and its default settings: PROBE_SHARD_SIZE 40, PROBE_CONCURRENCY 6,
 * SWEEP_PERIOD_SECONDS 60) runs against the devcluster as the least-privileged
 * `kubefn-system/kubefn` ServiceAccount; its cron is fired at every wall-clock minute, as
 * Cloudflare fires `* * * * *`.
 *
 * n External Proxies (default 10,000; `KUBEFN_BENCH_PROBES=<n>`) with `intervalSeconds: 30` are
 * created in parallel (64 in flight), spread round-robin over 4 local forward proxies that reach
 * one local target; each Proxy's probe URL names it (`/p/<name>`), so the target records every
 * probe of every Proxy. No event reaches the Worker: its sweeps alone converge the Proxies and
 * probe them. Once at least 99 % are Ready (or after `KUBEFN_BENCH_PROBES_CONVERGE` seconds,
 * default 900) and then a whole minute passed in which no probe shard wrote or re-probed and the
 * target saw at most 10 % more probes than due (a drained backlog of late shards; at most
 * `KUBEFN_BENCH_PROBES_SETTLE` seconds, default 300: the Proxies Ready last still get their first
 * health reports), a window (default 180 s; `KUBEFN_BENCH_PROBES_WINDOW=<s>`) measures the interval
 * between consecutive probes of each Proxy (p50/p99/max; probes under 5 s after the last are
 * counted apart as extra: a write conflict's re-probe, a latency confirmation), the probes per
 * minute, the Proxies whose longest wait for a probe stayed within a minute (and within 45 s),
 * and the peak of connections open at once at the forward proxies (every invocation together: an
 * upper bound of one invocation's). From the Worker's own pass lines it adds each probe shard's
 * wall time (p50/p99), what the shards did (probes, confirmations, writes, conflict re-probes), how
 * many ran at once, and their wall time per probe; from /proc, the CPU seconds per minute of every
 * process of the bench (workerd, the devcluster, this process with the forward proxies and the
 * target) and the share of the whole machine that was busy — whoever's work it was.
 * Ends with one JSON line `{"bench":"worker-probes",...}`.
 *
 * Caveats: wrangler's local runtime is one workerd process on this machine, shared with the API
 * server, etcd, the fixtures and the bench; its queue consumer and isolate are not Cloudflare's
 * (there, invocations run on many machines). The 6-connection bound holds per invocation
 * (`boundedProber`, the Worker's `probeSlots: "invocation"`), as on Cloudflare.
 */

import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { createTestHarness, type TestHarness } from "wrangler";
import { serviceAccountToken } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { isAlreadyExists, type KubeObject } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { startForwardProxies } from "../support/probe-fixtures.ts";
import { type BenchRow, benchCluster, createNamespace, percentile, round } from "./cluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface WorkerProbesOptions {
  proxies: number;
  windowSeconds: number;
  /** Longest wait for the fleet to be Ready before the window, seconds. */
  convergeSeconds: number;
  /** Longest wait, once Ready, for a minute without shard writes, seconds. */
  settleSeconds: number;
}

export const defaultWorkerProbes: WorkerProbesOptions = {
  proxies: Number(process.env.KUBEFN_BENCH_PROBES ?? 10_000),
  windowSeconds: Number(process.env.KUBEFN_BENCH_PROBES_WINDOW ?? 180),
  convergeSeconds: Number(process.env.KUBEFN_BENCH_PROBES_CONVERGE ?? 900),
  settleSeconds: Number(process.env.KUBEFN_BENCH_PROBES_SETTLE ?? 300),
};

/** The target: answers 200 and records when each Proxy (`/p/<name>`) was probed. */
interface RecordingTarget {
  port: number;
  hits: Map<string, number[]>;
  total: number;
  close(): Promise<void>;
}

async function startRecordingTarget(): Promise<RecordingTarget> {
  const state = { hits: new Map<string, number[]>(), total: 0 };
  const server = http.createServer((req, res) => {
    const at = Date.now();
    state.total++;
    const name = (req.url ?? "").split("/p/")[1];
    if (name) {
      const list = state.hits.get(name);
      if (list) list.push(at);
      else state.hits.set(name, [at]);
    }
    res.writeHead(200, { "content-type": "text/plain", connection: "close" }).end("ok\n");
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get hits() {
      return state.hits;
    },
    get total() {
      return state.total;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** CPU seconds (user + system) of this process and each descendant, summed by command name. */
function cpuByCommand(): Record<string, number> {
  const stats = new Map<number, { ppid: number; comm: string; ticks: number }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const raw = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = raw.lastIndexOf(")");
      const comm = raw.slice(raw.indexOf("(") + 1, close);
      const f = raw.slice(close + 2).split(" ");
      stats.set(Number(entry), { ppid: Number(f[1]), comm, ticks: Number(f[11]) + Number(f[12]) });
    } catch {
      // Exited while listed.
    }
  }
  const mine = new Set([process.pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, s] of stats)
      if (!mine.has(pid) && mine.has(s.ppid)) {
        mine.add(pid);
        grew = true;
      }
  }
  const out: Record<string, number> = {};
  for (const pid of mine) {
    const s = stats.get(pid);
    if (s) out[s.comm] = (out[s.comm] ?? 0) + s.ticks / 100;
  }
  return out;
}

/** Busy and total CPU seconds of the whole machine (/proc/stat), every process of every user. */
function machineCpu(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0) / 100;
  const idle = (f[3]! + f[4]!) / 100;
  return { busy: total - idle, total };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A probe shard's `job` line (JSON, one per shard at its end, with `shard` counts and `ms`). */
function shardLine(message: string): { time: string; ms: number; shard: Record<string, number> } | undefined {
  if (!message.includes('"shard":{')) return undefined;
  try {
    return JSON.parse(message) as { time: string; ms: number; shard: Record<string, number> };
  } catch {
    return undefined; // Not a job line.
  }
}

const shardCounts = (message: string) => shardLine(message)?.shard;

/** The Worker's error lines (JSON, telemetry.ts) by message, with one example each. */
function errorsOf(logs: readonly { message: string }[]) {
  const errors: Record<string, { count: number; example: string }> = {};
  let errorLines = 0;
  for (const l of logs) {
    if (!/"level":"error"/.test(l.message)) continue;
    errorLines++;
    let key = "unparsed";
    try {
      key = String((JSON.parse(l.message) as { msg?: unknown }).msg ?? "unparsed");
    } catch {
      // Counted under "unparsed".
    }
    const seen = errors[key];
    if (seen) seen.count++;
    else errors[key] = { count: 1, example: l.message.slice(0, 300) };
  }
  return { errors, errorLines };
}

/** The Worker's error lines since `from`, by message: one progress line, or "" when none. */
function newErrors(logs: readonly { message: string }[], from: number): string {
  const { errors } = errorsOf(logs.slice(from));
  return Object.entries(errors)
    .map(([msg, e]) => `"${msg}" ×${e.count} (${e.example.slice(0, 200)})`)
    .join("; ");
}

/** `max_batch_size` of the Worker's queue consumer in wrangler.toml: shards per invocation. */
function consumerBatchSize(): number {
  const toml = readFileSync(`${root}wrangler.toml`, "utf8");
  return Number(/\[\[queues\.consumers\]\][^[]*?max_batch_size\s*=\s*(\d+)/.exec(toml)?.[1] ?? Number.NaN);
}

/** `PROBE_SHARD_SIZE` in wrangler.toml's [vars]: Proxies per probe shard. */
function probeShardSize(): number {
  const toml = readFileSync(`${root}wrangler.toml`, "utf8");
  return Number(/^PROBE_SHARD_SIZE\s*=\s*"(\d+)"/m.exec(toml)?.[1] ?? Number.NaN);
}

export interface WorkerProbesResult {
  rows: BenchRow[];
  json: Record<string, unknown>;
}

export async function benchWorkerProbes(
  opts: WorkerProbesOptions = defaultWorkerProbes,
): Promise<WorkerProbesResult> {
  const t0 = performance.now();
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, "bench-wprobes");
  const [target, proxies] = await Promise.all([
    startRecordingTarget(),
    startForwardProxies(4, { record: false }),
  ]);
  const workerToken = await serviceAccountToken(createNodeTransport(cluster.kc), "kubefn-system", "kubefn");
  let harness: TestHarness | undefined;
  let cron: ReturnType<typeof setTimeout> | undefined;
  const sweeps: { at: number; ms: number; outcome: string }[] = [];
  try {
    // Fleet: created in parallel before the Worker starts, so no event and no sweep sees half of it.
    const tc = performance.now();
    const objects: KubeObject[] = Array.from({ length: opts.proxies }, (_, i) => ({
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: `px-${i}` },
      spec: {
        mode: "External",
        endpoint: { host: "127.0.0.1", port: proxies.ports[i % proxies.ports.length]!, scheme: "http" },
        healthCheck: {
          probeURL: `http://127.0.0.1:${target.port}/p/px-${i}`,
          expectedStatus: 200,
          intervalSeconds: 30,
          timeoutSeconds: 5,
          successThreshold: 1,
          failureThreshold: 3,
        },
      },
    }));
    await mapWithConcurrency(objects, 64, async (o) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await cluster.admin.create(proxyResource, o);
        } catch (err) {
          if (isAlreadyExists(err)) return o;
          if (attempt > 10) throw err;
          await sleep(200 * (attempt + 1));
        }
      }
    });
    const createSeconds = (performance.now() - tc) / 1000;
    process.stderr.write(`worker-probes: ${opts.proxies} Proxies created in ${round(createSeconds)} s\n`);

    harness = createTestHarness({
      root,
      workers: [
        {
          configPath: "wrangler.toml",
          vars: { KUBE_SERVER: cluster.devcluster.info.httpProxy, PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS },
          secrets: {
            KUBE_TOKEN: workerToken,
            AUDIT_TOKEN: crypto.randomUUID(),
            RELAY_SECRET: crypto.randomUUID(),
            // Keys the MAC on the probe shards' objects: without it probes run in the cron sweep.
            STATUS_SEAL_KEY: crypto.randomUUID(),
          },
        },
      ],
    });
    await harness.listen();
    const worker = harness.getWorker();
    // `* * * * *`: at every wall-clock minute.
    const fire = async () => {
      const at = Date.now();
      try {
        const r = await worker.scheduled({ cron: "* * * * *", scheduledTime: new Date(at) });
        sweeps.push({ at, ms: Date.now() - at, outcome: r.outcome });
      } catch (err) {
        sweeps.push({ at, ms: Date.now() - at, outcome: String(err).slice(0, 200) });
      }
    };
    const schedule = () => {
      cron = setTimeout(
        () => {
          void fire();
          schedule();
        },
        60_000 - (Date.now() % 60_000),
      );
    };
    const tw = performance.now();
    void fire();
    schedule();

    // Converged: at least 99 % of the Proxies Ready (provisioned and reported healthy).
    let ready = 0;
    let errorsSeen = 0;
    const deadline = Date.now() + opts.convergeSeconds * 1000;
    while (Date.now() < deadline) {
      await sleep(10_000);
      ready = 0;
      let token: string | undefined;
      do {
        const page = await cluster.admin.list(proxyResource, {
          namespace: ns,
          limit: 1000,
          ...(token ? { continue: token } : {}),
        });
        for (const p of page.items)
          if ((p.status as { phase?: string } | undefined)?.phase === "Ready") ready++;
        token = page.continue;
      } while (token);
      const logs = harness.getLogs();
      const errorsNow = newErrors(logs, errorsSeen);
      errorsSeen = logs.length;
      process.stderr.write(
        `worker-probes: ${ready}/${opts.proxies} Ready after ${round((performance.now() - tw) / 1000)} s; ` +
          `${target.total} probes so far, ${sweeps.length} sweeps${errorsNow ? `; worker errors: ${errorsNow}` : ""}\n`,
      );
      if (ready >= opts.proxies * 0.99) break;
    }
    const convergeSeconds = (performance.now() - tw) / 1000;

    // Settled: the Proxies Ready last are still written (first health reports, and the shards
    // planned before that conflict on them and re-probe), and the shards planned while the
    // passes of convergence filled the queue are still queued, late (drained, they probe each
    // Proxy again seconds after its next shard). The window starts after a whole minute in which
    // no shard wrote or re-probed and the target saw at most 10 % more probes than are due (or
    // after `settleSeconds`).
    const ts = performance.now();
    const settleDeadline = Date.now() + opts.settleSeconds * 1000;
    const wantedPerMinute = opts.proxies * 2;
    let quietSince = Date.now();
    let logsSeen = harness.getLogs().length;
    const totals: { at: number; total: number }[] = [{ at: Date.now(), total: target.total }];
    for (;;) {
      await sleep(5_000);
      const now = Date.now();
      totals.push({ at: now, total: target.total });
      const logs = harness.getLogs();
      for (const l of logs.slice(logsSeen)) {
        const c = shardCounts(l.message);
        if (c && ((c.writes ?? 0) > 0 || (c.retried ?? 0) > 0)) quietSince = now;
      }
      logsSeen = logs.length;
      const minuteAgo = totals.find((t) => t.at >= now - 60_000)!;
      const perMinute = ((target.total - minuteAgo.total) / Math.max(1, now - minuteAgo.at)) * 60_000;
      if (perMinute > wantedPerMinute * 1.1) quietSince = now;
      if (now - quietSince >= 60_000 || now >= settleDeadline) break;
    }
    const settleSeconds = (performance.now() - ts) / 1000;
    process.stderr.write(
      `worker-probes: settled in ${round(settleSeconds)} s (a minute without shard writes or a backlog's extra probes)\n`,
    );

    // The window: every probe of every Proxy, as the target saw it.
    proxies.resetPeak();
    const w0 = Date.now();
    const cpu0 = cpuByCommand();
    const machine0 = machineCpu();
    const logs0 = harness.getLogs().length;
    const total0 = target.total;
    const sweeps0 = sweeps.length;
    await sleep(opts.windowSeconds * 1000);
    const w1 = Date.now();
    const cpu1 = cpuByCommand();
    const machine1 = machineCpu();
    const windowProbes = target.total - total0;
    // Intervals between a Proxy's probes. Under 5 s they are not its rhythm but extra probes
    // (a write conflict's re-probe, a latency confirmation): counted apart.
    const intervals: number[] = [];
    let extraProbes = 0;
    let everyMinute = 0;
    let every45 = 0;
    let probedInWindow = 0;
    for (const times of target.hits.values()) {
      const inWindow = times.filter((t) => t >= w0 && t < w1);
      if (inWindow.length > 0) probedInWindow++;
      let worst = 0;
      let last = w0;
      let previous: number | undefined;
      for (const t of inWindow) {
        if (previous !== undefined) {
          if (t - previous < 5000) extraProbes++;
          else intervals.push((t - previous) / 1000);
        }
        if (previous === undefined || t - previous >= 5000) previous = t;
        worst = Math.max(worst, t - last);
        last = t;
      }
      worst = Math.max(worst, w1 - last);
      if (inWindow.length > 0 && worst <= 60_000) everyMinute++;
      if (inWindow.length > 0 && worst <= 45_000) every45++;
    }
    intervals.sort((a, b) => a - b);
    const minutes = (w1 - w0) / 60_000;
    const windowSweeps = sweeps.slice(sweeps0);
    // The Worker's own error lines over the whole run, by message, with one example each.
    const { errors, errorLines } = errorsOf(harness.getLogs());
    // Every line the Worker logged, for reading afterwards (`KUBEFN_BENCH_PROBES_LOGS=<file>`).
    if (process.env.KUBEFN_BENCH_PROBES_LOGS)
      writeFileSync(
        process.env.KUBEFN_BENCH_PROBES_LOGS,
        harness
          .getLogs()
          .map((l) => `${l.message}\n`)
          .join(""),
      );
    for (const [msg, e] of Object.entries(errors))
      process.stderr.write(`worker-probes: worker error "${msg}" ×${e.count}: ${e.example}\n`);
    // Probe shards as the Worker logged them (one "job" line each, at its end, with `shard`
    // counts and `ms`): how long a shard took, what it did, and how many ran at once.
    const shards: { end: number; ms: number; c: Record<string, number> }[] = [];
    for (const l of harness.getLogs().slice(logs0)) {
      const line = shardLine(l.message);
      if (!line) continue;
      const end = Date.parse(line.time);
      if (end >= w0 && end < w1) shards.push({ end, ms: line.ms, c: line.shard });
    }
    const sumOf = (k: string) => shards.reduce((a, s) => a + (s.c[k] ?? 0), 0);
    const shardMs = shards.map((s) => s.ms).sort((a, b) => a - b);
    const edges = shards.flatMap((s) => [
      [s.end - s.ms, 1],
      [s.end, -1],
    ]);
    edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
    let running = 0;
    let shardsAtOnce = 0;
    for (const [, d] of edges) {
      running += d!;
      shardsAtOnce = Math.max(shardsAtOnce, running);
    }
    const shardBusyMs = shards.reduce((a, s) => a + s.ms, 0);
    const cpu = (name: string) => round((cpu1[name] ?? 0) - (cpu0[name] ?? 0), 1);
    const windowS = (w1 - w0) / 1000;
    const cpuSeconds: Record<string, number> = Object.fromEntries(
      [...new Set([...Object.keys(cpu0), ...Object.keys(cpu1)])]
        .map((k): [string, number] => [k, cpu(k)])
        .filter(([, v]) => v !== 0),
    );
    process.stderr.write(
      `worker-probes: window CPU s by process ${JSON.stringify(cpuSeconds)}; machine busy ` +
        `${round(machine1.busy - machine0.busy)} of ${round(machine1.total - machine0.total)} CPU s\n`,
    );
    const json = {
      bench: "worker-probes",
      proxies: opts.proxies,
      intervalSeconds: 30,
      createSeconds: round(createSeconds),
      createdPerSecond: round(opts.proxies / createSeconds),
      convergeSeconds: round(convergeSeconds),
      settleSeconds: round(settleSeconds),
      readyAtWindow: ready,
      windowSeconds: round((w1 - w0) / 1000),
      probesPerMinute: round(windowProbes / minutes),
      probesPerMinuteWanted: opts.proxies * 2,
      intervalP50Seconds: round(percentile(intervals, 0.5), 2),
      intervalP99Seconds: round(percentile(intervals, 0.99), 2),
      intervalMaxSeconds: round(intervals.at(-1) ?? 0, 2),
      intervals: intervals.length,
      proxiesProbedInWindow: probedInWindow,
      proxiesProbedEveryMinute: everyMinute,
      proxiesNeverWaiting45Seconds: every45,
      extraProbesUnder5Seconds: extraProbes,
      peakConnectionsAtProxies: proxies.peak,
      probeShardSize: probeShardSize(),
      probeConcurrency: 6,
      consumerBatchSize: consumerBatchSize(),
      sweepsInWindow: windowSweeps.length,
      sweepMsMax: Math.max(0, ...windowSweeps.map((s) => s.ms)),
      sweepFailures: sweeps.filter((s) => s.outcome !== "ok").length,
      shardsInWindow: shards.length,
      shardMsP50: percentile(shardMs, 0.5),
      shardMsP99: percentile(shardMs, 0.99),
      shardProbes: sumOf("probed"),
      shardConfirmations: sumOf("confirmations"),
      shardWrites: sumOf("writes"),
      shardRetried: sumOf("retried"),
      shardsAtOnceMax: shardsAtOnce,
      /** Shard wall time per probe made (first probes, confirmations and re-probes). */
      shardMsPerProbe: round(shardBusyMs / Math.max(1, sumOf("probed") + sumOf("confirmations")), 2),
      shardBusyShare: round(shardBusyMs / 1000 / windowS, 2),
      cpuSecondsPerMinute: Object.fromEntries(
        Object.entries(cpuSeconds).map(([k, v]) => [k, round((v / windowS) * 60, 1)]),
      ),
      machineBusyShare: round((machine1.busy - machine0.busy) / (machine1.total - machine0.total), 2),
      workerErrorLines: errorLines,
      workerErrors: Object.fromEntries(Object.entries(errors).map(([m, e]) => [m, e.count])),
      runSeconds: round((performance.now() - t0) / 1000),
    };
    const rows: BenchRow[] = [
      {
        name: `worker-probes ${opts.proxies} create`,
        figure: json.createdPerSecond,
        unit: "Proxies created/s",
        note: `${opts.proxies} External Proxies (intervalSeconds 30) in ${json.createSeconds} s, 64 creates in flight`,
      },
      {
        name: `worker-probes ${opts.proxies} converge`,
        figure: json.convergeSeconds,
        unit: "s",
        note: `Worker start to ${ready} Ready, sweeps alone (no events)`,
      },
      {
        name: `worker-probes ${opts.proxies} probes`,
        figure: json.probesPerMinute,
        unit: "probes/min",
        note: `wanted ${json.probesPerMinuteWanted} (2 a minute each); window ${json.windowSeconds} s`,
      },
      {
        name: `worker-probes ${opts.proxies} interval p50 / p99`,
        figure: `${json.intervalP50Seconds} / ${json.intervalP99Seconds}`,
        unit: "s",
        note: `${json.intervals} intervals ≥ 5 s (${extraProbes} extra probes < 5 s apart), max ${json.intervalMaxSeconds} s; ${everyMinute}/${opts.proxies} Proxies probed at least once a minute, ${every45} never waited 45 s`,
      },
      {
        name: `worker-probes ${opts.proxies} connections`,
        figure: proxies.peak,
        unit: "open at once (all invocations)",
        note: `peak at the 4 forward proxies in the window; shards of ${probeShardSize()}, 6 probes in flight per isolate`,
      },
    ];
    return { rows, json };
  } finally {
    if (cron) clearTimeout(cron);
    await harness?.close().catch(() => undefined);
    await Promise.all([target.close(), proxies.close()]);
    // The namespace and its Proxies go with the bench's devcluster.
  }
}
