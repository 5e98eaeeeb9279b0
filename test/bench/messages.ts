/**
 * Figure 4: queue messages per object per hour at steady state, counted over a simulated hour.
 *
 * On the devcluster: 20 External Proxies with health checks against 2 local forward proxies, and
 * 3 Managed Proxies (pod provider, no health check). After converging, a fake clock runs one hour:
 * every minute the real sweep (`runSweep` with every task `createOperators` gives the platforms,
 * real probes, real API calls) and, in between, every message at its due time through `runPass`.
 * Messages are counted by origin: drift (the sweep's due shard), health (a reconcile the health
 * task asked for) and follow-up (a pass's Outcome). The hour runs twice: once delivering every
 * message (a serverless queue: Workers Queues, EventBridge Scheduler) and once coalescing per key
 * like the Node host's WorkQueue (a pending message for a key absorbs a later one).
 */

import { createOperators } from "../../shared/app/operators.ts";
import { runSweep } from "../../shared/app/sweep.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createNodeProber } from "../../shared/health/node-prober.ts";
import type { KubeObject } from "../../shared/kube/port.ts";
import {
  type Message,
  type PassMessage,
  type PassResult,
  type Queue,
  requestKey,
  runPass,
} from "../../shared/runtime/index.ts";
import { loopbackProbeAllowList } from "../support/loopback.ts";
import { startForwardProxy, startHttpTarget } from "../support/probe-fixtures.ts";
import {
  type BenchRow,
  benchCluster,
  benchContext,
  createMany,
  createNamespace,
  eventually,
  fakeClock,
  namespacedKube,
  round,
} from "./cluster.ts";

type Origin = "drift" | "health" | "followUp";

interface Pending {
  dueAt: number;
  message: PassMessage;
}

/** The simulated queue: delivers at due times of the fake clock; optionally coalesces per key. */
class SimQueue implements Queue {
  pending = new Map<string, Pending[]>();
  phase: "sweep" | "pass" = "pass";
  coalesce = false;
  counting = false;
  sent = new Map<string, Record<Origin, number>>();
  coalesced = 0;
  /** Passes run per key while counting. */
  passes = new Map<string, number>();
  conflicts = 0;
  constructor(private readonly now: () => number) {}

  async send(messages: Message[], delaySeconds = 0): Promise<void> {
    for (const message of messages as PassMessage[]) {
      const key = requestKey(message.request);
      const origin: Origin =
        this.phase === "pass"
          ? "followUp"
          : message.trigger?.kind === "drift" || message.trigger?.kind === "safety-net"
            ? "drift"
            : "health";
      if (this.counting) {
        const c = this.sent.get(key) ?? { drift: 0, health: 0, followUp: 0 };
        c[origin]++;
        this.sent.set(key, c);
      }
      const dueAt = this.now() + delaySeconds * 1000;
      const list = this.pending.get(key) ?? [];
      if (this.coalesce && list.length > 0) {
        this.coalesced++;
        list[0]!.dueAt = Math.min(list[0]!.dueAt, dueAt);
        continue;
      }
      list.push({ dueAt, message });
      this.pending.set(key, list);
    }
  }

  /** The earliest pending message due at or before `t`, removed from the queue. */
  take(t: number): Pending | undefined {
    let best: { key: string; i: number; p: Pending } | undefined;
    for (const [key, list] of this.pending) {
      list.forEach((p, i) => {
        if (p.dueAt <= t && (!best || p.dueAt < best.p.dueAt)) best = { key, i, p };
      });
    }
    if (!best) return undefined;
    const list = this.pending.get(best.key)!;
    list.splice(best.i, 1);
    if (list.length === 0) this.pending.delete(best.key);
    return best.p;
  }
}

export async function benchMessagesPerHour(opts = { external: 20, managed: 3 }): Promise<BenchRow[]> {
  const cluster = await benchCluster();
  const ns = await createNamespace(cluster.admin, "bench-hour");
  const target = await startHttpTarget();
  const forwardProxies = await Promise.all([startForwardProxy(), startForwardProxy()]);
  try {
    const objects: KubeObject[] = [];
    for (let i = 0; i < opts.external; i++) {
      objects.push({
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: ns, name: `ext-${i}` },
        spec: {
          mode: "External",
          endpoint: { host: "127.0.0.1", port: forwardProxies[i % 2]!.port, scheme: "http" },
          healthCheck: { probeURL: `http://127.0.0.1:${target.port}/` },
        },
      });
    }
    for (let i = 0; i < opts.managed; i++) {
      objects.push({
        apiVersion: "crawl.kubefn.dev/v1alpha1",
        kind: "Proxy",
        metadata: { namespace: ns, name: `managed-${i}` },
        spec: { mode: "Managed", provider: "kubernetes", cloudInit: { inline: "#cloud-config\n" } },
      });
    }
    await createMany(cluster.admin, proxyResource, objects);

    const clock = fakeClock(Math.floor(Date.now() / 60_000) * 60_000);
    const queue = new SimQueue(() => clock.now().getTime());
    const transport = cluster.counted();
    const ctx = benchContext(namespacedKube(transport, ns), queue, clock);
    const operators = createOperators({
      prober: createNodeProber(),
      sweepPeriodSeconds: 60,
      probeAllowList: loopbackProbeAllowList,
    });
    const resync = operators.registry.controller("proxy")!.resyncSeconds;

    // Converge in real time (Pods need the simulated node): the creation event's pass, then each
    // follow-up at once (≤ 0.5 s apart), until no pass writes or asks for an early follow-up.
    const converged = new Set<string>();
    await eventually(
      "every Proxy converged",
      async () => {
        for (const o of objects) {
          const name = o.metadata.name!;
          if (converged.has(name)) continue;
          clock.set(Math.max(clock.now().getTime(), Math.floor(Date.now() / 1000) * 1000));
          const r: PassResult = await runPass(ctx, operators.registry, {
            request: { controller: "proxy", namespace: ns, name },
            attempt: 0,
          });
          if (!r.wroteStatus && r.result !== "error" && (r.followUpSeconds ?? resync) >= resync)
            converged.add(name);
        }
        return converged.size === objects.length ? true : undefined;
      },
      90_000,
      500,
    );
    // Drop the converging passes' early follow-ups; keep each object's last (drift) one.
    for (const [key, list] of queue.pending) {
      const last = list.filter((p) => p.dueAt - clock.now().getTime() >= resync * 1000).at(-1);
      if (last) queue.pending.set(key, [last]);
      else queue.pending.delete(key);
    }

    const simulate = async (minutes: number) => {
      for (let m = 0; m < minutes; m++) {
        const minute = clock.now().getTime();
        queue.phase = "sweep";
        await runSweep(ctx, operators.registry, operators.sweepTasks, { shardSize: 100, attachListed: true });
        queue.phase = "pass";
        for (;;) {
          const next = queue.take(minute + 59_999);
          if (!next) break;
          clock.set(Math.max(clock.now().getTime(), next.dueAt));
          const r = await runPass(ctx, operators.registry, next.message);
          if (queue.counting) {
            queue.passes.set(r.key, (queue.passes.get(r.key) ?? 0) + 1);
            if (r.errorClass === "conflict") queue.conflicts++;
          }
        }
        clock.set(minute + 60_000);
      }
    };
    // Warm-up: health thresholds (2 successes) and the Ready reconcile play out.
    await simulate(5);

    const rows: BenchRow[] = [];
    // Each hour starts as a converged object would: at most one pending message per key.
    const collapse = () => {
      for (const [key, list] of queue.pending) {
        const earliest = list.reduce((a, b) => (b.dueAt < a.dueAt ? b : a));
        queue.pending.set(key, [earliest]);
      }
    };
    for (const coalesce of [true, false]) {
      collapse();
      queue.coalesce = coalesce;
      queue.counting = true;
      queue.sent.clear();
      queue.coalesced = 0;
      queue.passes.clear();
      queue.conflicts = 0;
      const errorsBefore = ctx.errors.filter((e) => !e.includes('"class":"conflict"')).length;
      transport.reset();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await simulate(60);
      const wallS = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const calls = transport.calls();
      const label = coalesce ? "node-host queue" : "serverless queue";
      for (const mode of ["ext", "managed"] as const) {
        const n = mode === "ext" ? opts.external : opts.managed;
        const sum: Record<Origin, number> = { drift: 0, health: 0, followUp: 0 };
        for (const [key, c] of queue.sent) {
          if (!key.split("/")[2]!.startsWith(`${mode}-`)) continue;
          for (const o of Object.keys(sum) as Origin[]) sum[o] += c[o];
        }
        const per = (x: number) => round(x / n, 1);
        const total = sum.drift + sum.health + sum.followUp;
        let passes = 0;
        for (const [key, p] of queue.passes) if (key.split("/")[2]!.startsWith(`${mode}-`)) passes += p;
        const objectWrites = calls.filter(
          (c) => c.method !== "GET" && c.path.includes(`/proxies/${mode}-`),
        ).length;
        rows.push({
          name: `msgs/object/hour ${mode === "ext" ? "External+health" : "Managed"} (${label})`,
          figure: per(total),
          unit: "messages/object/h",
          note: `drift ${per(sum.drift)} + health ${per(sum.health)} + follow-up ${per(sum.followUp)}; design: drift 3600/${resync} = ${3600 / resync}; ${per(passes)} passes run, ${per(objectWrites)} Proxy writes per object-hour; n=${n}`,
        });
      }
      const reads = calls.filter((c) => c.method === "GET").length;
      rows.push({
        name: `simulated hour API (${label})`,
        figure: `${reads} / ${calls.length - reads}`,
        unit: "reads / writes",
        note: `${opts.external + opts.managed} Proxies, 60 sweeps; ${queue.conflicts} passes met a Conflict (stale snapshot → requeue); ${coalesce ? `${queue.coalesced} messages coalesced; ` : ""}${ctx.errors.filter((e) => !e.includes('"class":"conflict"')).length - errorsBefore} other failed passes; ran in ${round(wallS)} s wall, ${round((cpu.user + cpu.system) / 1000)} CPU ms`,
      });
    }
    return rows;
  } finally {
    await Promise.all([target.close(), ...forwardProxies.map((p) => p.close())]);
  }
}
