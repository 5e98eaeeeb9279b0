/**
 * Health-probe throughput: one sweep over `n` External proxies, all pointing at one local forward
 * proxy, probing a local HTTP target through it with the real Node prober (fresh connection per
 * probe) and the real sweep (state machine, status.health patches). `test/bench/run.ts` calls it.
 */

import { createNodeProber } from "../../shared/health/node-prober.ts";
import { type HealthSubject, probeAll } from "../../shared/health/sweep.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";

export interface HealthBenchResult {
  probes: number;
  concurrency: number;
  wallMs: number;
  probesPerSecond: number;
  /** User + system CPU of this process (which also runs the local proxy and target). */
  cpuMsPerProbe: number;
  okRatio: number;
  p50LatencyMs: number;
  p99LatencyMs: number;
  /** Writes of the first sweep (every proxy reaches its first verdict). */
  statusWrites: number;
  /** Writes of a second sweep over the stored states: 0 when latency is steady. */
  steadyStateWrites: number;
}

export async function benchProbes(n = 1000, concurrency = 32): Promise<HealthBenchResult> {
  const proxy = await startForwardProxy();
  const target = await startHttpTarget();
  try {
    const proxies: HealthSubject[] = Array.from({ length: n }, (_, i) => ({
      key: { namespace: "bench", name: `proxy-${i}` },
      resourceVersion: "1",
      deleting: false,
      instance: `127.0.0.1:${proxy.port}#${i}`,
      proxy: { host: "127.0.0.1", port: proxy.port, scheme: "http" },
      probe: { url: `http://127.0.0.1:${target.port}/healthz`, expectedStatus: 200, timeoutMs: 5000 },
      thresholds: { successThreshold: 1, failureThreshold: 3, minReportIntervalSeconds: 60 },
    }));
    const prober = createNodeProber();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const result = await probeAll({
      proxies,
      subjectFor: (p) => p,
      prober,
      allowList: loopbackProbeAllowList,
      now: () => new Date(),
      concurrency,
    });
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const latencies = result.outcomes
      .map((o) => o.result?.latencyMs ?? Number.NaN)
      .filter((x) => !Number.isNaN(x))
      .sort((a, b) => a - b);
    const pct = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
    return {
      probes: result.stats.probed,
      concurrency,
      wallMs: round(wallMs),
      probesPerSecond: round((result.stats.probed / wallMs) * 1000),
      cpuMsPerProbe: round((cpu.user + cpu.system) / 1000 / Math.max(1, result.stats.probed), 3),
      okRatio: result.stats.probed ? result.stats.ok / result.stats.probed : 0,
      p50LatencyMs: round(pct(0.5)),
      p99LatencyMs: round(pct(0.99)),
      statusWrites: result.stats.writes,
      steadyStateWrites: await steadySweepWrites(proxies, result.statusPatches, prober, concurrency),
    };
  } finally {
    await Promise.all([proxy.close(), target.close()]);
  }
}

/** Stores the first sweep's annotations, sweeps again, and counts the writes it would make. */
async function steadySweepWrites(
  proxies: HealthSubject[],
  patches: Array<{ key: { name: string }; patch: unknown }>,
  prober: ReturnType<typeof createNodeProber>,
  concurrency: number,
): Promise<number> {
  const stored = new Map(
    patches.map(({ key, patch }) => {
      const body = (patch as { body: { status: { health: string } } }).body;
      return [key.name, body.status.health] as const;
    }),
  );
  const again = proxies.map((p) => ({ ...p, stored: stored.get(p.key.name) }));
  const result = await probeAll({
    proxies: again,
    subjectFor: (p) => p,
    prober,
    allowList: loopbackProbeAllowList,
    now: () => new Date(),
    concurrency,
  });
  return result.stats.writes;
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
