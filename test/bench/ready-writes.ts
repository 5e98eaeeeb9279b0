/**
 * Figure 6: API writes for one Managed Proxy (pod provider, with a health check) from apply to
 * phase Ready, split by kind, against the minimum the state machine needs.
 *
 * Driven as the Node host would: the creation event's pass, then each follow-up (its delay cut to
 * at most 1 s: polls that find nothing new write nothing, so only the pass count depends on it),
 * and the health task every second (as a sweep would, on a fresh list). Once the Pod is Running,
 * a real forward proxy listens at its IP:3128 (test/e2e/proxy.test.ts does the same).
 *
 * The minimum, from shared/controllers/proxy/managed.ts and the health engine: finalizer (1,
 * before anything can be created), Pod create (1), spec-hash annotation (1, names what the
 * instance was built from), status Provisioning + providerID (1, else a crash loses the
 * instance), status IP + Provisioned=True (1), status.health (successThreshold writes: the
 * sweep keeps no memory between runs, so every counted probe is stored), status Ready/Healthy
 * (1). With the default successThreshold 2: 8.
 */

import { createOperators } from "../../shared/app/operators.ts";
import { proxyResource, proxySpecHashAnnotation } from "../../shared/controllers/proxy/api.ts";
import { proxyHealthTask } from "../../shared/controllers/proxy/health-task.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import { countingTransport, listAll } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import type { KubeObject, Transport, TransportRequest } from "../../shared/kube/port.ts";
import { runPass } from "../../shared/runtime/index.ts";
import { runSweepTask } from "../../shared/runtime/sweep/index.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { type ForwardProxy, startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";
import {
  type BenchRow,
  benchCluster,
  benchContext,
  createNamespace,
  namespacedKube,
  recordingQueue,
} from "./cluster.ts";

type Kind = "finalizer" | "podCreate" | "specHash" | "healthAnnotation" | "status" | "other";

function classify(req: TransportRequest): Kind | undefined {
  if (req.method === "GET") return undefined;
  const body = req.body ?? "";
  const path = req.path.split("?")[0]!;
  if (req.method === "POST" && /\/pods$/.test(path)) return "podCreate";
  if (/\/proxies\/[^/]+\/status$/.test(path))
    return body.includes('"health"') ? "healthAnnotation" : "status";
  if (/\/proxies\/[^/]+$/.test(path)) {
    if (body.includes('"finalizers"')) return "finalizer";
    if (body.includes(proxySpecHashAnnotation)) return "specHash";
  }
  return "other";
}

export async function benchApplyToReady(): Promise<BenchRow[]> {
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, "bench-ready");
  const target = await startHttpTarget();
  let forward: ForwardProxy | undefined;
  try {
    const writes: Array<{ kind: Kind; phase?: string }> = [];
    const node = createNodeTransport(cluster.kc);
    const recorder: Transport = {
      async request(req) {
        const kind = classify(req);
        const res = await node.request(req);
        if (kind && res.status >= 200 && res.status < 300) {
          const phase =
            kind === "status" ? (/"phase":"(\w+)"/.exec(String(req.body))?.[1] ?? "-") : undefined;
          writes.push({ kind, ...(phase ? { phase } : {}) });
        }
        return res;
      },
    };
    const transport = countingTransport(recorder);
    const clock = { now: () => new Date() };
    const queue = recordingQueue(clock);
    const ctx = benchContext(namespacedKube(transport, ns), queue, clock);
    const { registry } = createOperators({
      prober: createNodeProber(),
      sweepPeriodSeconds: 60,
      probeAllowList: loopbackProbeAllowList,
    });
    const health = proxyHealthTask({
      allowList: loopbackProbeAllowList,
      prober: createNodeProber(),
      concurrency: 32,
      sweepPeriodSeconds: 60,
      minReportIntervalSeconds: 1,
    });

    const name = "ready";
    const created = await cluster.admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name },
      spec: {
        mode: "Managed",
        provider: "kubernetes",
        cloudInit: { inline: "#cloud-config\n" },
        healthCheck: { probeURL: `http://127.0.0.1:${target.port}/`, timeoutSeconds: 2 },
      },
    });
    const successThreshold = 2; // the schema's default
    const t0 = performance.now();
    // The creation event.
    queue.sent.push({
      message: { request: { controller: "proxy", namespace: ns, name }, attempt: 0 },
      delaySeconds: 0,
      at: Date.now(),
    });
    let passes = 0;
    let sweeps = 0;
    let lastSweep = 0;
    let phase = "";
    for (;;) {
      if (performance.now() - t0 > 90_000) throw new Error(`not Ready after 90 s (phase ${phase})`);
      const due = queue.sent.filter((s) => s.at + Math.min(1000, s.delaySeconds * 1000) <= Date.now());
      for (const s of due) queue.sent.splice(queue.sent.indexOf(s), 1);
      for (const s of due) {
        if (s.message.kind === "job") continue;
        await runPass(ctx, registry, s.message);
        passes++;
      }
      const p = await cluster.admin.get<KubeObject & { status?: { ip?: string; phase?: string } }>(
        proxyResource,
        { namespace: ns, name },
      );
      phase = p.status?.phase ?? "";
      if (phase === "Ready") break;
      if (p.status?.ip && !forward) forward = await startForwardProxy({ host: p.status.ip, port: 3128 });
      if (Date.now() - lastSweep >= 1000) {
        lastSweep = Date.now();
        await runSweepTask(health, ctx, [await listAll(ctx.kube, proxyResource)]);
        sweeps++;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - t0) / 1000;
    const by = (k: Kind) => writes.filter((w) => w.kind === k).length;
    const total = writes.length;
    const minimum = 6 + successThreshold;
    const statusPhases = writes
      .filter((w) => w.kind === "status")
      .map((w) => w.phase)
      .join("→");
    const { reads } = transport.counts();
    return [
      {
        name: "apply→Ready writes",
        figure: `${total} / ${minimum}`,
        unit: "writes / minimum",
        note: `Managed + health check, ${passes} passes, ${sweeps} health sweeps, ${reads} reads, ${seconds.toFixed(1)} s; uid ${created.metadata.uid?.slice(0, 8)}`,
      },
      {
        name: "apply→Ready metadata",
        figure: `${by("finalizer")} + ${by("specHash")} + ${by("healthAnnotation")}`,
        unit: "finalizer + spec-hash + health",
        note: `minimum 1 + 1 + ${successThreshold} (one health-annotation write per counted probe, successThreshold ${successThreshold})`,
      },
      {
        name: "apply→Ready status",
        figure: by("status"),
        unit: "status patches",
        note: `minimum 3 (Provisioning+providerID, IP+Provisioned, Ready); phases in the patches: ${statusPhases} ("-": phase unchanged)${by("status") > 3 ? "; the extra one is the finalizer pass's own status patch (phase Pending + observedGeneration)" : ""}`,
      },
      {
        name: "apply→Ready provider",
        figure: by("podCreate"),
        unit: "Pod creates",
        note: `minimum 1${by("other") ? `; other writes: ${by("other")}` : ""}`,
      },
    ];
  } finally {
    await Promise.all([target.close(), forward?.close()]);
  }
}
