/**
 * Figure 5: one sweep over n External Proxies on the devcluster, each pointing (round-robin) at one
 * of 4 local forward proxies that reach one local target. The fixtures run in a child process
 * (`fixtures-server.ts`) so the CPU figures are the sweep's. The sweep is `runSweep` with
 * `proxyHealthTask` and `createNodeProber()` (concurrency 32), on a counted transport; its drift
 * shards go to a recording queue and are not run. Three sweeps: the first stores counters, the
 * second reaches the first verdict (successThreshold 2: status.health + reconcile request each), the
 * third is steady state.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createOperators } from "../../shared/app/operators.ts";
import { runSweep } from "../../shared/app/sweep.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { proxyHealthTask } from "../../shared/controllers/proxy/health-task.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import {
  type BenchRow,
  benchCluster,
  benchContext,
  createMany,
  createNamespace,
  namespacedKube,
  recordingQueue,
  round,
} from "./cluster.ts";
import { cpuMsOf } from "./proc.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

export async function benchSweep(sizes: number[]): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const fixtures = await startFixtures(4);
  try {
    for (const n of sizes) rows.push(...(await sweepOnce(n, fixtures.ports)));
  } finally {
    await fixtures.stop();
  }
  return rows;
}

async function sweepOnce(n: number, ports: { target: number; proxies: number[] }): Promise<BenchRow[]> {
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, `bench-sweep-${n}`);
  const objects: KubeObject[] = Array.from({ length: n }, (_, i) => ({
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: ns, name: `ext-${i}` },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: ports.proxies[i % ports.proxies.length]!, scheme: "http" },
      healthCheck: { probeURL: `http://127.0.0.1:${ports.target}/healthz` },
    },
  }));
  const created = await createMany(cluster.admin, proxyResource, objects, 32);

  const transport = cluster.counted();
  const clock = { now: () => new Date() };
  const queue = recordingQueue(clock);
  const ctx = benchContext(namespacedKube(transport, ns), queue, clock);
  const { registry } = createOperators({
    prober: createNodeProber(),
    sweepPeriodSeconds: 60,
    probeAllowList: loopbackProbeAllowList,
  });
  const task = proxyHealthTask({
    prober: createNodeProber(),
    allowList: loopbackProbeAllowList,
    concurrency: 32,
    sweepPeriodSeconds: 60,
  });
  const apiPid = cluster.devcluster.process.pid!;

  const rows: BenchRow[] = [
    {
      name: `sweep ${n} create`,
      figure: round(n / (created.ms / 1000)),
      unit: "Proxies created/s",
      note: `${n} External Proxies in ${round(created.ms / 1000)} s, 32 creates in flight (setup, not the sweep)`,
    },
  ];
  const labels = ["1st (counters)", "2nd (first verdict)", "3rd (steady)"];
  for (const label of labels) {
    transport.reset();
    queue.sent.length = 0;
    const cpu0 = process.cpuUsage();
    const api0 = cpuMsOf(apiPid);
    const t0 = performance.now();
    const summary = await runSweep(ctx, registry, [task], { shardSize: 100, attachListed: true });
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const apiCpu = cpuMsOf(apiPid) - api0;
    const stats = summary.tasks["proxy-health"] as Record<string, number>;
    const probed = stats.probed ?? 0;
    const { reads, writes } = transport.counts();
    const probeSeconds = (stats.ms ?? ms) / 1000;
    rows.push(
      {
        name: `sweep ${n} ${label}`,
        figure: round(probed / probeSeconds),
        unit: "probes/s",
        note: `${probed} probed (${stats.ok} ok) in ${round(probeSeconds, 2)} s of health task (probes + status.health writes, 32 of each in flight), whole sweep ${round(ms / 1000, 2)} s`,
      },
      {
        name: `sweep ${n} ${label} API`,
        figure: `${reads} / ${writes}`,
        unit: "reads / writes per sweep",
        note: `list pages + status.health patches; ${queue.sent.length} messages sent (drift due ${summary.controllers.proxy?.due ?? 0}, reconcile requests ${(stats.reports ?? 0) > 0 ? stats.reports : 0})`,
      },
      {
        name: `sweep ${n} ${label} CPU`,
        figure: round((cpu.user + cpu.system) / 1000 / Math.max(1, probed), 3),
        unit: "CPU ms/probe",
        note: `the sweeping process only (fixtures run apart); devcluster spent ${round(apiCpu / Math.max(1, probed), 3)} CPU ms/probe`,
      },
    );
  }
  if (ctx.errors.length > 0)
    rows.push({
      name: `sweep ${n} errors`,
      figure: ctx.errors.length,
      unit: "log lines",
      note: ctx.errors[0]!.slice(0, 160),
    });
  return rows;
}

interface Fixtures {
  ports: { target: number; proxies: number[] };
  /** Requests the target has answered so far. */
  hits(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts `fixtures-server.ts` and reads its ports. */
export function startFixtures(count: number): Promise<Fixtures> {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--import", "tsx", "test/bench/fixtures-server.ts", String(count)],
    { cwd: root, stdio: ["pipe", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const waiting: ((hits: number) => void)[] = [];
  const hits = () =>
    new Promise<number>((resolve) => {
      waiting.push(resolve);
      child.stdin!.write("hits\n");
    });
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    let ports: Fixtures["ports"] | undefined;
    child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      err = (err + c).slice(-2000);
    });
    child.stdout!.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
        const line = JSON.parse(out.slice(0, nl)) as { hits?: number } & Fixtures["ports"];
        out = out.slice(nl + 1);
        if (!ports) {
          ports = line;
          resolve({ ports, hits, stop });
        } else if (line.hits !== undefined) waiting.shift()?.(line.hits);
      }
    });
    void exited.then(() => reject(new Error(`fixtures-server exited: ${err}`)));
  });
}
