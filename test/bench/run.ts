/**
 * `npm run bench`: runs each named bench in turn and prints one table (name, figure, unit, note).
 * Add a bench by appending to `benches`; pass names to run only those (`npm run bench -- intake`).
 * The cluster benches share one devcluster, started on first use and stopped at the end, also
 * when a bench fails or the run is interrupted. `KUBEFN_BENCH_LARGE=1` adds the 10,000-Proxy sweep;
 * `chaos` (the chaos tests' full profiles, 0 % and 20 % side by side: 1,000 Proxies and 50 + 50
 * SubPools and Sites on the Node host, the outage, the Worker's runs; 35+ min on 2 cores) runs only
 * when named.
 * `fleet` starts its own devcluster (audit webhook on) and ends the output with one JSON line;
 * `KUBEFN_BENCH_FLEET_LARGE=1` runs it with 10,000 primaries; `KUBEFN_BENCH_FLEET_TRANSPORTS=http1,h2`
 * runs it once per host transport to the API server, without the peer, and prints their figures side by side. `lambda-memory` (the Lambda reconcile function's peak RSS
 * at 10,000 objects: the release bundle against the devcluster and moto; 5–20 min) runs only when
 * named. `worker-probes` (10,000 Proxies
 * probed by the Worker in workerd; `KUBEFN_BENCH_PROBES=<n>` for another size) runs only when named.
 * `replicas` (requests and probes per minute with 1 and 2 Node-host replicas, the takeover time
 * after a kill; 200 Proxies, `KUBEFN_BENCH_REPLICAS_PROXIES=<n>` for another size, ~8 min) runs
 * only when named. `reaction` (kubectl apply → first pass → Ready per intake path — the audit webhook
 * with the documented flags, the relay, EKS's and GKE's audit log exports — beside a controller-runtime
 * peer's watch, on the production-shaped devcluster; ~10 min) runs only when named. `clusters` (one
 * Node host over `KUBEFN_BENCH_CLUSTERS` × `KUBEFN_BENCH_CLUSTER_OBJECTS` devclusters × Proxies, 3 × 50
 * by default: steady requests per cluster-hour and probes on time, then the bill for 100 clusters of
 * 100 objects; a few minutes) runs only when named. `soak` (the Node host in the cluster and out of it, 35 minutes across three
 * expiries of 10-minute tokens; `KUBEFN_BENCH_SOAK_MINUTES`) runs only when named. `workerd-profile`
 * (V8's CPU profile of the Worker's isolate probing shards in workerd, by phase; `KUBEFN_BENCH_PROFILE_PROXIES`,
 * `KUBEFN_BENCH_PROFILE_SECONDS`, `KUBEFN_BENCH_PROFILE_OUT=<file>`; ~2 min) runs only when named. `host-memory` (the Node
 * host's RSS, live heap and CPU per probe at `KUBEFN_BENCH_HOST_MEMORY_STEPS` Proxies, each on a fresh
 * host, per `KUBEFN_BENCH_HOST_MEMORY_NODE_OPTIONS` variant; ~25 min) runs only when named.
 */
import { benchBundle } from "./bundle.ts";
import { benchChaos } from "./chaos.ts";
import type { BenchRow } from "./cluster.ts";
import { stopBenchCluster } from "./cluster.ts";
import { benchClusters } from "./clusters.ts";
import { benchConnections } from "./connections.ts";
import { benchCost } from "./cost.ts";
import { benchEmf } from "./emf.ts";
import { benchFleet, benchFleetTransports, fleetFromEnv, fleetTransportsFromEnv } from "./fleet.ts";
import { benchProbes } from "./health.ts";
import { benchHostMemory } from "./host-memory.ts";
import { benchIntake } from "./intake.ts";
import { benchLambdaMemory } from "./lambda-memory.ts";
import { benchAuditZod, benchMapping } from "./mapping.ts";
import { benchMessagesPerHour } from "./messages.ts";
import { benchMetrics } from "./metrics.ts";
import { benchProbeCpuRows } from "./probe-cpu.ts";
import { benchReaction } from "./reaction.ts";
import { benchApplyToReady } from "./ready-writes.ts";
import { benchReplicas } from "./replicas.ts";
import { benchSoak } from "./soak.ts";
import { benchSteadyPass } from "./steady-pass.ts";
import { benchSweep } from "./sweep.ts";
import { benchTraces } from "./traces.ts";
import { benchWorkerProbes } from "./worker-probes.ts";
import { benchWorkerdProfile } from "./workerd-profile.ts";

const large = process.env.KUBEFN_BENCH_LARGE === "1";
const jsonLines: string[] = [];

/** `explicit` benches run only when named (`npm run bench -- chaos`): they take many minutes. */
const benches: { name: string; run: () => Promise<BenchRow[]>; explicit?: boolean }[] = [
  { name: "bundle", run: benchBundle },
  {
    name: "mapping",
    run: async () => {
      const r = await benchMapping();
      return [
        {
          name: "mapping",
          figure: r.eventsPerSecond,
          unit: "events/s (1 core)",
          note: `10,000-event audit EventList mapped + deduplicated → ${r.requestsOut} requests (median of 9)`,
        },
      ];
    },
  },
  {
    name: "audit-zod-reference",
    run: async () => {
      const r = await benchAuditZod();
      return [
        {
          name: "audit-zod-reference",
          figure: r.eventsPerSecond,
          unit: "events/s (1 core)",
          note: `zod auditEventSchema alone on the same events (${r.valid} valid): why intake reads by hand`,
        },
      ];
    },
  },
  {
    name: "probes",
    run: async () => {
      const r = await benchProbes(1000, 32);
      return [
        {
          name: "probes (in-memory)",
          figure: r.probesPerSecond,
          unit: "probes/s",
          note: `no API server; ${r.probes} probes via 1 local forward proxy, concurrency ${r.concurrency}, p50 ${r.p50LatencyMs} ms, p99 ${r.p99LatencyMs} ms, ${r.cpuMsPerProbe} CPU ms/probe incl. in-process proxy+target`,
        },
      ];
    },
  },
  { name: "probe-cpu", run: benchProbeCpuRows },
  { name: "steady-pass", run: benchSteadyPass },
  { name: "metrics", run: benchMetrics },
  { name: "traces", run: benchTraces },
  { name: "emf", run: benchEmf },
  { name: "intake", run: benchIntake },
  { name: "messages", run: benchMessagesPerHour },
  { name: "sweep", run: () => benchSweep(large ? [1000, 10_000] : [1000]) },
  { name: "ready-writes", run: benchApplyToReady },
  { name: "connections", run: benchConnections },
  { name: "chaos", run: benchChaos, explicit: true },
  { name: "reaction", run: benchReaction, explicit: true },
  {
    name: "replicas",
    run: async () => {
      const r = await benchReplicas();
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
    explicit: true,
  },
  {
    name: "soak",
    run: async () => {
      const r = await benchSoak();
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
    explicit: true,
  },
  {
    name: "cost",
    run: async () => {
      const r = await benchCost();
      jsonLines.push(JSON.stringify(r.json));
      if (r.failure) {
        // Every line of both bills stays printed; the bench fails on the goal it missed.
        rows.push(...r.rows);
        throw new Error(r.failure);
      }
      return r.rows;
    },
  },
  { name: "lambda-memory", run: benchLambdaMemory, explicit: true },
  {
    name: "clusters",
    run: async () => {
      const r = await benchClusters();
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
    explicit: true,
  },
  {
    name: "worker-probes",
    run: async () => {
      const r = await benchWorkerProbes();
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
    explicit: true,
  },
  { name: "workerd-profile", run: benchWorkerdProfile, explicit: true },
  {
    name: "host-memory",
    run: async () => {
      const r = await benchHostMemory();
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
    explicit: true,
  },
  {
    name: "fleet",
    run: async () => {
      const transports = fleetTransportsFromEnv();
      const r =
        transports.length > 0
          ? await benchFleetTransports(fleetFromEnv(), transports)
          : await benchFleet(fleetFromEnv());
      jsonLines.push(JSON.stringify(r.json));
      return r.rows;
    },
  },
];

const only = process.argv.slice(2);
const unknown = only.filter((n) => !benches.some((b) => b.name === n));
if (unknown.length > 0) {
  console.error(`unknown bench ${unknown.join(", ")}; known: ${benches.map((b) => b.name).join(", ")}`);
  process.exit(2);
}

let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    interrupted = true;
    void stopBenchCluster().finally(() => process.exit(130));
  });
}

const rows: BenchRow[] = [];
let failed = false;
const t0 = performance.now();
try {
  for (const bench of benches) {
    if (interrupted) break;
    if (only.length > 0 ? !only.includes(bench.name) : bench.explicit) continue;
    const started = performance.now();
    process.stderr.write(`bench ${bench.name} …\n`);
    try {
      rows.push(...(await bench.run()));
    } catch (err) {
      failed = true;
      rows.push({ name: bench.name, figure: "FAILED", unit: "", note: String(err).slice(0, 300) });
    }
    process.stderr.write(
      `bench ${bench.name} done in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
    );
  }
} finally {
  await stopBenchCluster();
}
if (!large && (only.length === 0 || only.includes("sweep"))) {
  rows.push({
    name: "sweep 10,000",
    figure: "skipped",
    unit: "",
    note: "opt-in: KUBEFN_BENCH_LARGE=1 npm run bench -- sweep (creating 10,000 Proxies and 3 sweeps add ~2.5 min on 2 cores)",
  });
}
printTable(rows);
console.log(`total ${((performance.now() - t0) / 1000).toFixed(0)} s`);
for (const line of jsonLines) console.log(line);
process.exit(failed ? 1 : 0);

function printTable(table: BenchRow[]): void {
  const cells = table.map((r) => [r.name, String(r.figure), r.unit, r.note ?? ""]);
  const head = ["name", "figure", "unit", "note"];
  const width = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  width[3] = Math.min(width[3]!, 200);
  const line = (c: string[]) =>
    c
      .map((x, i) => (i === 1 ? x.padStart(width[i]!) : x.padEnd(width[i]!)))
      .join(" │ ")
      .trimEnd();
  console.log(line(head));
  console.log(width.map((w) => "─".repeat(w)).join("─┼─"));
  for (const c of cells) console.log(line(c));
}
