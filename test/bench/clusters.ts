/**
 * `npm run bench -- clusters`: one Node host reconciling a fleet of N clusters of M objects each
 * (issue 35), and what 100 clusters of 100 objects cost a month on Workers and on Lambda beside
 * 100 controller pods.
 *
 * Each cluster is a devcluster of its own whose audit webhook goes to a tee in this process (the
 * fleet bench's `AuditTee`): it counts every request of kubefn's ServiceAccount as that API
 * server sees it — reads too — and forwards the writes to the host's intake with the cluster's
 * own audit token. In each cluster, M External Proxies are probed every 30 s at a target of the
 * cluster's own (its hits are that cluster's probes). Once every Proxy is Ready, a steady window
 * with nothing changing gives, per cluster: requests per hour at its API server, and probes at
 * its target against the probes due.
 *
 * The bill is the cost bench's (`benchCost`: one second of probing measured on each platform's
 * consumer path, priced by cost-model.ts) for 100 × 100 = 10,000 objects, and `podBill` × 100.
 *
 * Knobs: `KUBEFN_BENCH_CLUSTERS` (N, default 3), `KUBEFN_BENCH_CLUSTER_OBJECTS` (M, default 50),
 * `KUBEFN_BENCH_CLUSTERS_STEADY_SECONDS` (default 150: two sweeps and more than a 30 s probe
 * period's worth of rounds).
 *
 * Caveats: the bill's model prices one deployment's objects: 100 clusters of 100 objects list the
 * same 10,000 objects a minute as one cluster of 10,000 (one sweep each, lists per kind per
 * cluster), so the variable part is the same; what each cluster adds is its API server requests
 * (measured here, the clusters' cost, not billed to kubefn).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import { allowListEntriesFor, applyAllowLists, optInNamespace } from "../../functions/node/install.ts";
import { mapWithConcurrency } from "../../shared/concurrency/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, listAll } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { functionsKubeconfig } from "../e2e/host.ts";
import { externalProxy } from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { tempDir } from "../support/temp-dir.ts";
import type { BenchRow } from "./cluster.ts";
import { round } from "./cluster.ts";
import { benchCost } from "./cost.ts";
import { type Prices, podBill } from "./cost-model.ts";
import {
  AuditTee,
  benchAuditPolicy,
  KUBEFN_USER,
  type RunningCluster,
  startAuditedDevcluster,
} from "./fleet.ts";

const PROBE_INTERVAL_SECONDS = 30;
/** The fleet the bill is for. */
const BILLED = { clusters: 100, objects: 100 };

interface BenchCluster {
  name: string;
  tee: AuditTee;
  running: RunningCluster;
  target: Target;
}

function knob(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

export interface ClustersResult {
  rows: BenchRow[];
  json: Record<string, unknown>;
}

export async function benchClusters(): Promise<ClustersResult> {
  const n = knob("KUBEFN_BENCH_CLUSTERS", 3);
  const m = knob("KUBEFN_BENCH_CLUSTER_OBJECTS", 50);
  const steadySeconds = knob("KUBEFN_BENCH_CLUSTERS_STEADY_SECONDS", 150);
  const dir = tempDir("kubefn-bench-clusters-").path;
  mkdirSync(dir, { recursive: true });
  const policy = benchAuditPolicy(dir);
  const clusters: BenchCluster[] = [];
  let host: NodeHost | undefined;
  let forward: ForwardProxy | undefined;
  try {
    forward = await startForwardProxy({ record: false });
    for (let i = 0; i < n; i++) {
      const tee = new AuditTee();
      const webhook = await tee.start();
      const target = await startHttpTarget();
      clusters.push({ name: `c${i}`, tee, target, running: undefined as unknown as RunningCluster });
      clusters[i]!.running = await startAuditedDevcluster(webhook, tee.token, policy);
    }
    const declared = await Promise.all(
      clusters.map(async (c) => {
        const admin = createKube(createNodeTransport(loadKubeConfig({ file: c.running.kubeconfig })));
        const file = await functionsKubeconfig(c.running.kubeconfig);
        await optInNamespace(admin, "default");
        await applyAllowLists(admin, allowListEntriesFor(parseNodeHostEnv({}).settings.operators));
        return { name: c.name, credential: { kind: "kubeconfig", file }, auditToken: c.tee.token };
      }),
    );
    const config = parseNodeHostEnv({
      KUBEFN_CLUSTERS: JSON.stringify(declared),
      KUBEFN_HOST: "127.0.0.1",
      KUBEFN_PORT: "0",
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
    });
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
    host = await startNodeHost(config, quiet);
    for (const c of clusters) c.tee.intake = { url: `${host.url}/v1/events`, token: c.tee.token };
    const t0 = Date.now();
    await Promise.all(
      clusters.map(async (c) => {
        const admin = createKube(createNodeTransport(loadKubeConfig({ file: c.running.kubeconfig })), {
          fieldManager: "bench",
        });
        await mapWithConcurrency(
          Array.from({ length: m }, (_, j) => j),
          8,
          (j) =>
            admin.create(
              proxyResource,
              externalProxy(`p${j}`, forward!.port, c.target.port, PROBE_INTERVAL_SECONDS),
            ),
        );
      }),
    );
    const readyAt = await Promise.all(clusters.map((c) => allReady(c, m)));
    const convergeSeconds = round((Math.max(...readyAt) - t0) / 1000, 1);
    process.stderr.write(`clusters: ${n} × ${m} Proxies Ready in ${convergeSeconds} s\n`);
    // Steady: nothing changes; each cluster's requests at its API server and probes at its target.
    const hits0 = clusters.map((c) => c.target.hits);
    const s0 = Date.now();
    await new Promise((r) => setTimeout(r, steadySeconds * 1000));
    const s1 = Date.now();
    const hours = (s1 - s0) / 3_600_000;
    const due = (m * (s1 - s0)) / 1000 / PROBE_INTERVAL_SECONDS;
    const perCluster = clusters.map((c, i) => {
      const calls = c.tee.between(KUBEFN_USER, s0, s1);
      const byVerb: Record<string, number> = {};
      for (const call of calls) byVerb[call.verb] = (byVerb[call.verb] ?? 0) + 1;
      return {
        cluster: c.name,
        requestsPerHour: round(calls.length / hours, 0),
        byVerbPerHour: Object.fromEntries(Object.entries(byVerb).map(([v, k]) => [v, round(k / hours, 0)])),
        probes: c.target.hits - hits0[i]!,
        due: round(due, 1),
        probesOnTime: round((c.target.hits - hits0[i]!) / due, 3),
      };
    });
    for (const p of perCluster) process.stderr.write(`clusters: ${JSON.stringify(p)}\n`);
    // The bill: the cost bench's measured model for 100 × 100 objects, beside 100 pods.
    const cost = await benchCost();
    const prices = JSON.parse(readFileSync(new URL("./prices-2025.json", import.meta.url), "utf8")) as Prices;
    const pod = podBill(prices);
    const bills = cost.json.bills as Record<string, number>;
    if ((cost.json.objects as number) !== BILLED.clusters * BILLED.objects)
      throw new Error(
        `the cost bench priced ${cost.json.objects} objects, not ${BILLED.clusters * BILLED.objects}`,
      );
    const pods = { low: pod.low * BILLED.clusters, high: pod.high * BILLED.clusters };
    const requests = perCluster.map((p) => p.requestsPerHour);
    const onTime = perCluster.map((p) => p.probesOnTime);
    const rows: BenchRow[] = [
      {
        name: "clusters steady requests",
        figure: `${Math.min(...requests)}–${Math.max(...requests)}`,
        unit: "requests per cluster-hour (at each API server)",
        note: `${n} clusters × ${m} External Proxies on one Node host, 60 s sweep, ${steadySeconds} s steady window; converged in ${convergeSeconds} s`,
      },
      {
        name: "clusters probes on time",
        figure: `${Math.min(...onTime)}–${Math.max(...onTime)}`,
        unit: "probes at each cluster's target ÷ probes due (every 30 s)",
        note: perCluster.map((p) => `${p.cluster} ${p.probes}/${p.due}`).join(", "),
      },
      ...Object.entries(bills).map(([platform, total]) => ({
        name: `clusters bill ${platform}`,
        figure: round(total, 2),
        unit: `$/month for ${BILLED.clusters} clusters × ${BILLED.objects} objects`,
        note: "the cost bench's model (npm run bench -- cost) at 10,000 objects",
      })),
      {
        name: "clusters bill pods",
        figure: `${pods.low}–${pods.high}`,
        unit: `$/month for ${BILLED.clusters} controller pods`,
        note: `one always-on pod per cluster ($${pod.low}–${pod.high} each)`,
      },
    ];
    return {
      rows,
      json: {
        bench: "clusters",
        clusters: n,
        objectsPerCluster: m,
        steadySeconds,
        convergeSeconds,
        perCluster,
        bill: { clusters: BILLED.clusters, objectsPerCluster: BILLED.objects, ...bills, pods },
      },
    };
  } finally {
    await host?.stop();
    for (const c of clusters) {
      await c.running?.stop();
      await c.tee.stop();
      await c.target.close();
    }
    await forward?.close();
  }
}

/** When every one of the cluster's `m` Proxies first read Ready (polled each second). */
async function allReady(c: BenchCluster, m: number): Promise<number> {
  const admin = createKube(createNodeTransport(loadKubeConfig({ file: c.running.kubeconfig })));
  const deadline = Date.now() + 600_000;
  for (;;) {
    const proxies = await listAll(admin, proxyResource, { namespace: "default" });
    const ready = proxies.filter((p) => (p as { status?: { phase?: string } }).status?.phase === "Ready");
    if (ready.length >= m) return Date.now();
    if (Date.now() > deadline)
      throw new Error(`${c.name}: ${ready.length} of ${m} Proxies Ready after 600 s`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}
