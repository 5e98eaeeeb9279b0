/**
 * `npm run bench -- replicas`: what a second Node-host replica costs, and how fast a survivor
 * takes over. n External Proxies (default 200; `KUBEFN_BENCH_REPLICAS_PROXIES`) health-checked
 * every sweep period through 2 local forward proxies; hosts as the least-privileged
 * `kubefn-system/kubefn`, sweeping every 10 s, each through its own recording pass-through to
 * the API server (every request counted, the Lease's apart).
 *
 * Phases, each a steady window of nine sweep periods once every Proxy is Ready and a minute
 * went by without a write (bounded at 4 minutes):
 * 1. two replicas without the Lease (`KUBEFN_SWEEP_LEASE=off`: what two replicas did before it);
 * 2. one replica with the Lease; 3. a second replica joins;
 * 4. the holder is killed (SIGKILL, no release): the takeover time is from the kill to the
 *    survivor's "sweep lease acquired" line and to its first sweep.
 *
 * Caveats: the takeover is bounded by the lease duration (2 sweep periods) plus up to one period
 * until the standby's next look; with the default 60 s period, 2–3 minutes.
 */
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { isNotFound, Resources } from "../../shared/kube/index.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import { functionsKubeconfig, type HostProcess, type LogLine, startHost } from "../e2e/host.ts";
import { startRecordingApiProxy } from "../support/api-recorder.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { startForwardProxies, startHttpTarget } from "../support/probe-fixtures.ts";
import { type BenchRow, benchCluster, createMany, createNamespace, eventually, round } from "./cluster.ts";

const SWEEP_SECONDS = 10;
const WINDOW_PERIODS = 9;
const LEASE = { namespace: "kubefn-system", name: "kubefn-sweep" };

type Recorder = Awaited<ReturnType<typeof startRecordingApiProxy>>;
interface Replica {
  host: HostProcess;
  api: Recorder;
}

interface Window {
  replicas: number;
  lease: boolean;
  requestsPerMinute: number;
  leaseRequestsPerMinute: number;
  probesPerMinute: number;
  sweepsPerMinute: number;
  /** Requests per minute of each replica (Lease included). */
  perReplica: number[];
  /** Probes per minute each replica ran (its probe shards' counts). */
  probesPerReplica: number[];
}

export async function benchReplicas(
  proxies = Number(process.env.KUBEFN_BENCH_REPLICAS_PROXIES ?? 200),
): Promise<{ rows: BenchRow[]; json: Record<string, unknown> }> {
  const cluster = await benchCluster();
  const { admin } = cluster;
  const leaseGone = () =>
    admin.delete(Resources.Lease, LEASE).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
  await leaseGone();
  const target = await startHttpTarget();
  const forward = await startForwardProxies(2, { record: false });
  const ns = await createNamespace(admin, "bench-replicas");
  const running: Replica[] = [];
  const start = async (lease: boolean): Promise<Replica> => {
    const api = await startRecordingApiProxy(cluster.devcluster.info.httpProxy);
    const host = await startHost({
      KUBECONFIG: await functionsKubeconfig(cluster.kubeconfig, api.url),
      KUBEFN_SWEEP_SECONDS: String(SWEEP_SECONDS),
      KUBEFN_SWEEP_LEASE: lease ? `${LEASE.namespace}/${LEASE.name}` : "off",
    });
    const replica = { host, api };
    running.push(replica);
    return replica;
  };
  const stop = async (r: Replica, signal?: NodeJS.Signals) => {
    await r.host.stop(signal);
    await new Promise((done) => r.api.server.close(done));
    running.splice(running.indexOf(r), 1);
  };
  try {
    await createMany(
      admin,
      proxyResource,
      Array.from(
        { length: proxies },
        (_, i): KubeObject => ({
          apiVersion: "crawl.kubefn.dev/v1alpha1",
          kind: "Proxy",
          metadata: { namespace: ns, name: `ext-${i}` },
          spec: {
            mode: "External",
            endpoint: { host: "127.0.0.1", port: forward.ports[i % forward.ports.length]!, scheme: "http" },
            healthCheck: {
              probeURL: `http://127.0.0.1:${target.port}/`,
              intervalSeconds: SWEEP_SECONDS,
              successThreshold: 1,
            },
          },
        }),
      ),
      32,
    );
    const ready = () =>
      eventually(
        `${proxies} Proxies Ready`,
        async () => {
          // A list the loaded machine did not answer in time is "not yet".
          const items = await admin
            .list<KubeObject & { status?: { phase?: string } }>(proxyResource, { namespace: ns })
            .then((l) => l.items)
            .catch(() => []);
          return items.filter((p) => p.status?.phase === "Ready").length === proxies ? true : undefined;
        },
        600_000,
        2000,
      );
    const measure = async (lease: boolean): Promise<Window> => {
      // Settle: every Proxy Ready, then a minute without a write (latency reports of the busy
      // start corrected), bounded: a fleet that never settles is measured as it is.
      await ready();
      const settleFrom = Date.now();
      await eventually(
        "a minute without a write",
        async () => {
          const now = Date.now();
          const writes = running.flatMap((r) =>
            r.api.calls.filter((c) => c.at >= now - 60_000 && c.method !== "GET" && !isLeaseCall(c.path)),
          );
          return now - settleFrom >= 60_000 && writes.length === 0 ? true : undefined;
        },
        240_000,
        2000,
      ).catch(() => undefined);
      const marks = running.map((r) => ({ line: r.host.lines.length, call: r.api.calls.length }));
      const hits = target.hits;
      const t0 = Date.now();
      await sleep(WINDOW_PERIODS * SWEEP_SECONDS * 1000);
      const minutes = (Date.now() - t0) / 60_000;
      const calls = running.map((r, i) => r.api.calls.slice(marks[i]!.call));
      const perMinute = (n: number) => round(n / minutes, 0);
      const leaseCalls = calls.flat().filter((c) => isLeaseCall(c.path)).length;
      return {
        replicas: running.length,
        lease,
        requestsPerMinute: perMinute(calls.flat().length),
        leaseRequestsPerMinute: perMinute(leaseCalls),
        probesPerMinute: perMinute(target.hits - hits),
        sweepsPerMinute: perMinute(
          running.reduce((n, r, i) => n + sweeps(r.host.lines.slice(marks[i]!.line)), 0),
        ),
        perReplica: calls.map((c) => perMinute(c.length)),
        probesPerReplica: running.map((r, i) => perMinute(probed(r.host.lines.slice(marks[i]!.line)))),
      };
    };

    process.stderr.write(`replicas: ${proxies} Proxies; 2 replicas without the Lease …\n`);
    await Promise.all([start(false), start(false)]);
    const before = await measure(false);
    for (const r of [...running]) await stop(r);

    process.stderr.write("replicas: 1 replica with the Lease …\n");
    await start(true);
    const one = await measure(true);
    process.stderr.write("replicas: 2 replicas with the Lease …\n");
    await start(true);
    const two = await measure(true);

    process.stderr.write("replicas: killing the holder …\n");
    const holder = running.find((r) => sweeps(r.host.lines.slice(-200)) > 0 && acquired(r.host.lines) > 0)!;
    const survivor = running.find((r) => r !== holder)!;
    const from = survivor.host.lines.length;
    const killedAt = Date.now();
    await stop(holder, "SIGKILL");
    const took = await survivor.host.waitFor(
      (l) => l.msg === "sweep lease acquired" && survivor.host.lines.indexOf(l) >= from,
      (4 * SWEEP_SECONDS + 30) * 1000,
    );
    const swept = await survivor.host.waitFor(
      (l) => l.msg === "sweep" && survivor.host.lines.indexOf(l) >= from,
      60_000,
    );
    const takeover = {
      acquiredSeconds: round((Date.parse(took.time) - killedAt) / 1000, 1),
      firstSweepSeconds: round((Date.parse(swept.time) - killedAt) / 1000, 1),
      leaseDurationSeconds: 2 * SWEEP_SECONDS,
      sweepPeriodSeconds: SWEEP_SECONDS,
    };

    const row = (w: Window, label: string): BenchRow => ({
      name: `replicas ${label}`,
      figure: `${w.requestsPerMinute} / ${w.probesPerMinute}`,
      unit: "requests/min / probes/min",
      note: `${w.sweepsPerMinute} sweeps/min; ${w.leaseRequestsPerMinute} Lease requests/min; per replica ${w.perReplica.join(" + ")} requests/min and ${w.probesPerReplica.join(" + ")} probes/min; ${proxies} Proxies, ${SWEEP_SECONDS} s sweep`,
    });
    const rows: BenchRow[] = [
      row(before, "2, no Lease (before)"),
      row(one, "1, Lease"),
      row(two, "2, Lease"),
      {
        name: "replicas takeover",
        figure: `${takeover.acquiredSeconds} / ${takeover.firstSweepSeconds}`,
        unit: "s kill → Lease taken / first sweep",
        note: `holder SIGKILLed (no release); lease duration ${takeover.leaseDurationSeconds} s = 2 sweep periods, the standby looks once per period`,
      },
    ];
    return {
      rows,
      json: { bench: "replicas", proxies, sweepSeconds: SWEEP_SECONDS, before, one, two, takeover },
    };
  } finally {
    await removeNamespaces(admin, [ns], { dropFinalizers: true }).catch(() => undefined);
    for (const r of [...running]) await stop(r).catch(() => undefined);
    await forward.close();
    await target.close();
    await leaseGone().catch(() => undefined);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sweeps = (lines: readonly LogLine[]) => lines.filter((l) => l.msg === "sweep").length;
const probed = (lines: readonly LogLine[]) =>
  lines
    .filter((l) => l.msg === "job")
    .reduce((n, l) => n + Number((l.shard as { probed?: number } | undefined)?.probed ?? 0), 0);
const acquired = (lines: readonly LogLine[]) => lines.filter((l) => l.msg === "sweep lease acquired").length;
const isLeaseCall = (path: string) =>
  path.startsWith(`/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases/${LEASE.name}`) ||
  path.startsWith(`/apis/coordination.k8s.io/v1/namespaces/${LEASE.namespace}/leases?`);
