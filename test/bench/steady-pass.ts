/**
 * Figure 2: API requests of one steady-state reconcile pass, on the real devcluster. A Managed
 * Proxy (provider "kubernetes": a Pod the simulated node runs) and an External Proxy are driven
 * by `runPass` with the operators every platform runs until a pass writes nothing and asks for no
 * early follow-up; then one more pass each is counted, once as an event-triggered pass (it GETs
 * the Proxy) and once as a sweep drift pass (the sweep's list snapshot saves that GET).
 */

import { createOperators } from "../../shared/app/operators.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import { type Message, type PassResult, runPass } from "../../shared/runtime/index.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import {
  type BenchRow,
  benchCluster,
  benchContext,
  createNamespace,
  namespacedKube,
  recordingQueue,
} from "./cluster.ts";

export async function benchSteadyPass(): Promise<BenchRow[]> {
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, "bench-steady");
  const transport = cluster.counted();
  const clock = { now: () => new Date() };
  const queue = recordingQueue(clock);
  const ctx = benchContext(namespacedKube(transport, ns), queue, clock);
  const { registry } = createOperators({
    prober: createNodeProber(),
    sweepPeriodSeconds: 60,
    probeAllowList: loopbackProbeAllowList,
  });

  const proxies: KubeObject[] = [
    {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: "managed" },
      spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config\n" } },
    },
    {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: "external" },
      spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" } },
    },
  ];
  const rows: BenchRow[] = [];
  for (const proxy of proxies) {
    await cluster.admin.create(proxyResource, proxy);
    const name = proxy.metadata.name!;
    const message: Message = { request: { controller: "proxy", namespace: ns, name }, attempt: 0 };
    // Converge: run the pass the way follow-ups would (delays shortened to 0.5 s at most).
    let passes = 0;
    let last: PassResult | undefined;
    const started = Date.now();
    for (;;) {
      last = await runPass(ctx, registry, message);
      passes++;
      const converged = !last.wroteStatus && (last.followUpSeconds ?? 300) >= 300 && last.result !== "error";
      if (converged) break;
      if (Date.now() - started > 60_000) throw new Error(`${name} did not converge: ${JSON.stringify(last)}`);
      await new Promise((r) => setTimeout(r, Math.min(500, (last?.followUpSeconds ?? 0) * 1000)));
    }
    transport.reset();
    const steady = await runPass(ctx, registry, message);
    const event = transport.counts();
    const followUp =
      steady.followUpSeconds === undefined ? "no follow-up" : `follow-up in ${steady.followUpSeconds}s`;
    const mode = String((proxy.spec as { mode: string }).mode);
    rows.push({
      // A drift pass costs the same: no body stands in for the Proxy's GET (issue 30).
      name: `steady-pass ${mode} (event)`,
      figure: `${event.reads} / ${event.writes}`,
      unit: "reads / writes per pass",
      note: `converged in ${passes} passes; the steady pass: ${steady.result}, ${followUp}`,
    });
  }
  if (ctx.errors.length > 0)
    rows.push({ name: "steady-pass errors", figure: ctx.errors.length, unit: "lines" });
  return rows;
}
