/**
 * Figure 3: intake requests per second on the Node host for signed relay batches of 100 events,
 * measured from a second process over loopback keep-alive connections. The host is
 * `functions/node/main.ts` as a child (test/e2e/host.ts), on the run's devcluster as the kubefn
 * ServiceAccount, relay intake on, sweep quiet (3600 s). The events name Proxies
 * (crawl.kubefn.dev, a registered kind) that do not exist, so each pass the host runs meanwhile is
 * a cheap GET → NotFound → done; the host's queue coalesces requests per key.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { functionsKubeconfig, startHost } from "../e2e/host.ts";
import { type BenchRow, benchCluster, round } from "./cluster.ts";
import type { LoadConfig, LoadResult } from "./intake-load.ts";
import { cpuMsOf } from "./proc.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const BATCH = 100;
/** Distinct missing Proxy names the batches cycle through. */
const NAMES = 2000;

export async function benchIntake(opts = { concurrency: 8, durationMs: 10_000 }): Promise<BenchRow[]> {
  const cluster = await benchCluster();
  const secret = randomBytes(24).toString("hex");
  const host = await startHost({
    KUBECONFIG: await functionsKubeconfig(cluster.kubeconfig),
    KUBEFN_RELAY_SECRET: secret,
    KUBEFN_SWEEP_SECONDS: "3600",
  });
  try {
    const config: LoadConfig = {
      url: `${host.url}/v1/events`,
      secret,
      concurrency: opts.concurrency,
      warmupRequests: 200,
      durationMs: opts.durationMs,
      maxRequests: 200_000,
      batchSize: BATCH,
      names: NAMES,
      namespace: "bench-intake",
    };
    const passesBefore = host.lines.filter((l) => l.msg === "pass").length;
    const cpuBefore = cpuMsOf(host.child.pid!);
    const load = await runLoad(config);
    const hostCpuMs = cpuMsOf(host.child.pid!) - cpuBefore;
    const passes = host.lines.filter((l) => l.msg === "pass").length - passesBefore;
    const seconds = load.wallMs / 1000;
    const reqPerSecond = load.accepted / seconds;
    const note = `${opts.concurrency} keep-alive connections, ${round(seconds)} s, ${load.accepted} accepted, ${load.failed} failed`;
    return [
      { name: "intake relay", figure: round(reqPerSecond), unit: "req/s", note },
      {
        name: "intake relay events",
        figure: Math.round(reqPerSecond * BATCH),
        unit: "events/s",
        note: `${BATCH} events per signed batch, all mapped; ${load.enqueued} requests enqueued`,
      },
      {
        name: "intake relay latency",
        figure: `${round(load.p50Ms)} / ${round(load.p99Ms)}`,
        unit: "ms p50 / p99",
        note: "per batch, measured in the client process",
      },
      {
        name: "intake host CPU",
        figure: round(hostCpuMs / Math.max(1, load.accepted), 2),
        unit: "CPU ms/batch",
        note: `host process incl. ${passes} NotFound passes it ran meanwhile (queue coalesces per key; ${NAMES} names); client ${round(load.clientCpuMs / Math.max(1, load.accepted), 2)} ms/batch`,
      },
    ];
  } finally {
    await host.stop();
  }
}

function runLoad(config: LoadConfig): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "test/bench/intake-load.ts"], {
      cwd: root,
      env: { ...process.env, KUBEFN_BENCH_LOAD: JSON.stringify(config) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      err = (err + c).slice(-2000);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), config.durationMs + 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const line = out.trim().split("\n").at(-1);
      if (code !== 0 || !line) return reject(new Error(`intake-load exited ${code}: ${err}`));
      resolve(JSON.parse(line) as LoadResult);
    });
  });
}
