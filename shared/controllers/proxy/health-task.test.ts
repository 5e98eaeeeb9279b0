import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it, vi } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { encodeHealthState, type Prober } from "../../health/index.ts";
import type { KubeObject } from "../../kube/port.ts";
import { createSweepMemo } from "../../runtime/index.ts";
import { runSweepTask } from "../../runtime/sweep/index.ts";
import { proxyResource } from "./api.ts";
import { proxyDriftReason } from "./drift.ts";
import { proxyHealthSubject } from "./health-subject.ts";
import { proxyHealthTask } from "./health-task.ts";

const now = new Date("2026-11-30T12:00:00Z");

function externalProxy(name: string, status: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "crawl", name, uid: `uid-${name}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128 },
      healthCheck: { probeURL: "http://example.com/", successThreshold: 2, failureThreshold: 3 },
    },
    status,
  };
}

describe("proxy health task", () => {
  it("000 §6: a reconcile request the queue drops leaves the reported markers where they were, so the next probe asks again", async () => {
    const kube = new FakeKube();
    const proxy = externalProxy("dropped");
    Object.assign((proxy.spec as { healthCheck: object }).healthCheck, { successThreshold: 1 });
    kube.seed(proxyResource, proxy);
    const { ctx, recorded } = fakeContext(kube, { now });
    const send = ctx.queue.send;
    let drop = true;
    ctx.queue.send = async (messages, delay) => {
      if (drop) throw new Error("queue unavailable");
      return send(messages, delay);
    };
    const task = proxyHealthTask({
      prober: { probe: async () => ({ ok: true, latencyMs: 5 }) },
      concurrency: 4,
      sweepPeriodSeconds: 60,
      confirmDelayMs: 0,
    });
    const key = { namespace: "crawl", name: "dropped" };
    const health = () =>
      JSON.parse(
        (kube.stored(proxyResource, key)?.status as { health?: string } | undefined)?.health ?? "{}",
      ) as {
        verdict?: boolean;
        reported?: unknown;
      };
    await task.handleShard(ctx, [kube.stored(proxyResource, key)!]);
    // The probe counted (the verdict is reached) but nothing says it was reported.
    expect(health()).toMatchObject({ verdict: true });
    expect(health().reported).toBeUndefined();
    expect(recorded.sent).toEqual([]);

    drop = false;
    await task.handleShard(ctx, [kube.stored(proxyResource, key)!]);
    expect(recorded.sent.flatMap((s) => s.messages.map((m) => m.request))).toEqual([
      { controller: "proxy", namespace: "crawl", name: "dropped" },
    ]);
    expect(health().reported).toMatchObject({ healthy: true });
  });

  it("attack: a tenant's hanging probe target holds the shared probe slots no longer than the timeout cap (30 s, and never past its interval)", async () => {
    // Tenant A writes six Proxies (the Worker's PROBE_CONCURRENCY) at a target that never answers,
    // with the largest timeout the old CRD allowed; tenant B's Proxy shares the shard.
    vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      const kube = new FakeKube();
      const hostile = Array.from({ length: 6 }, (_, i) => {
        const p = externalProxy(`slow-${i}`);
        p.metadata.namespace = "tenant-a";
        Object.assign((p.spec as { healthCheck: object }).healthCheck, {
          timeoutSeconds: 300,
          intervalSeconds: 300,
        });
        (p.spec as { endpoint: { host: string } }).endpoint = { host: "198.51.100.9", port: 3128 } as never;
        return p;
      });
      const victim = externalProxy("victim");
      victim.metadata.namespace = "tenant-b";
      for (const p of [...hostile, victim]) kube.seed(proxyResource, p);
      const { ctx } = fakeContext(kube, { now });
      let victimProbedAt: number | undefined;
      const prober: Prober = {
        probe: (t) => {
          if (t.proxy.host === "198.51.100.9") return new Promise(() => {});
          victimProbedAt = Date.now();
          return Promise.resolve({ ok: true, latencyMs: 1 });
        },
      };
      const task = proxyHealthTask({ prober, concurrency: 6, sweepPeriodSeconds: 60, confirmDelayMs: 0 });
      const done = task.handleShard(ctx, [...hostile, victim]);
      await vi.advanceTimersByTimeAsync(301_000);
      await done;
      expect(victimProbedAt).toBeDefined();
      expect(victimProbedAt! - now.getTime()).toBeLessThanOrEqual(30_000 + 250);
    } finally {
      vi.useRealTimers();
    }
  });

  it.each([
    [undefined, "probed before any hanging probe's deadline"],
    [
      6,
      "held behind the hanging probes until their deadline (the attack, with the budget as wide as the slots)",
    ],
  ])(
    "attack: one tenant's many hanging targets in one shard, another tenant's Proxy in the next shard on the same instance; namespace budget %s: %s",
    async (namespaceConcurrency, _expected) => {
      vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
      try {
        const kube = new FakeKube();
        const hostile = Array.from({ length: 12 }, (_, i) => {
          const p = externalProxy(`hang-${i}`);
          p.metadata.namespace = "tenant-a";
          (p.spec as { endpoint: { host: string } }).endpoint = { host: "198.51.100.9", port: 3128 } as never;
          return p;
        });
        const victim = externalProxy("victim");
        victim.metadata.namespace = "tenant-b";
        for (const p of [...hostile, victim]) kube.seed(proxyResource, p);
        const { ctx } = fakeContext(kube, { now });
        let victimProbedAt: number | undefined;
        const prober: Prober = {
          probe: (t) => {
            if (t.proxy.host === "198.51.100.9") return new Promise(() => {});
            victimProbedAt = Date.now();
            return Promise.resolve({ ok: true, latencyMs: 1 });
          },
        };
        // The Worker's 6 slots; the default namespace budget is half of them (3).
        const task = proxyHealthTask({
          prober,
          concurrency: 6,
          ...(namespaceConcurrency ? { namespaceConcurrency } : {}),
          sweepPeriodSeconds: 60,
          confirmDelayMs: 0,
        });
        const first = task.handleShard(ctx, hostile);
        await vi.advanceTimersByTimeAsync(10);
        const second = task.handleShard(ctx, [victim]);
        await vi.advanceTimersByTimeAsync(120_000);
        await Promise.all([first, second]);
        expect(victimProbedAt).toBeDefined();
        // A hanging probe holds its slot until its deadline (the default timeout, 5 s, plus grace).
        const waited = victimProbedAt! - now.getTime();
        if (namespaceConcurrency === undefined) expect(waited).toBeLessThan(1_000);
        else expect(waited).toBeGreaterThanOrEqual(5_000);
      } finally {
        vi.useRealTimers();
      }
    },
  );

  it.each([
    ["instance", true],
    ["invocation", false],
  ] as const)(
    "probe slots of scope %s: a shard of a second invocation waits for the first's slots: %s (workerd cancels such a wait as hung)",
    async (slotScope, waits) => {
      vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
      try {
        const kube = new FakeKube();
        // One namespace, as the bench's fleet: its 3 slots (half of the Worker's 6) held by the
        // first invocation's probes, which answer only after 4 s.
        const first = Array.from({ length: 6 }, (_, i) => externalProxy(`first-${i}`));
        const second = externalProxy("second");
        for (const p of [...first, second]) kube.seed(proxyResource, p);
        let secondProbedAt: number | undefined;
        const prober: Prober = {
          probe: (t) => {
            if (t.url.endsWith("/second")) {
              secondProbedAt = Date.now();
              return Promise.resolve({ ok: true, latencyMs: 1 });
            }
            return new Promise((resolve) => setTimeout(() => resolve({ ok: true, latencyMs: 4000 }), 4000));
          },
        };
        (second.spec as { healthCheck: { probeURL: string } }).healthCheck.probeURL =
          "http://example.com/second";
        const task = proxyHealthTask({
          prober,
          concurrency: 6,
          sweepPeriodSeconds: 60,
          confirmDelayMs: 0,
          slotScope,
        });
        // Two queue invocations of one isolate: each has its own reads (`consume` makes them).
        const invocation = () => ({ ...fakeContext(kube, { now }).ctx, memo: createSweepMemo() });
        const a = task.handleShard(invocation(), first);
        await vi.advanceTimersByTimeAsync(10);
        const b = task.handleShard(invocation(), [second]);
        await vi.advanceTimersByTimeAsync(20_000);
        await Promise.all([a, b]);
        expect(secondProbedAt).toBeDefined();
        const waited = secondProbedAt! - now.getTime();
        if (waits) expect(waited).toBeGreaterThanOrEqual(4_000);
        else expect(waited).toBeLessThan(1_000);
      } finally {
        vi.useRealTimers();
      }
    },
  );

  it.each([
    [6, 500],
    [32, 1000],
  ])(
    "a shard's probes start in groups over a spread that shrinks with fewer slots: %i slots, %i ms",
    async (slots, spreadMs) => {
      vi.useFakeTimers({ now, toFake: ["setTimeout", "clearTimeout", "Date"] });
      try {
        const kube = new FakeKube();
        const proxies = Array.from({ length: 40 }, (_, i) => externalProxy(`p-${i}`));
        for (const p of proxies) kube.seed(proxyResource, p);
        const { ctx } = fakeContext(kube, { now });
        const started: number[] = [];
        const prober: Prober = {
          probe: () => {
            started.push(Date.now() - now.getTime());
            return Promise.resolve({ ok: true, latencyMs: 1 });
          },
        };
        const task = proxyHealthTask({
          prober,
          concurrency: slots,
          sweepPeriodSeconds: 60,
          confirmDelayMs: 1000,
        });
        const done = task.handleShard(ctx, proxies);
        await vi.advanceTimersByTimeAsync(2_000);
        await done;
        expect(started).toHaveLength(40);
        // In groups of min(8, slots), evenly: the i-th group of g starts at i·g/40 of the spread.
        const group = Math.min(8, slots);
        const expected = Array.from({ length: 40 }, (_, i) =>
          Math.floor((Math.floor(i / group) * group * spreadMs) / 40),
        );
        expect(started.sort((a, b) => a - b)).toEqual(expected);
      } finally {
        vi.useRealTimers();
      }
    },
  );

  it("per-Proxy probe recency is a metric: every probe sets it, even one that changes no status", async () => {
    const kube = new FakeKube();
    const proxies = [externalProxy("a"), externalProxy("b")];
    for (const p of proxies) kube.seed(proxyResource, p);
    const { ctx } = fakeContext(kube, { now });
    const gauges: { name: string; value: number; labels?: Record<string, string> }[] = [];
    ctx.metrics = {
      ...ctx.metrics,
      gauge: (name, value, labels) => gauges.push({ name, value, ...(labels ? { labels } : {}) }),
    };
    const prober: Prober = {
      probe: async (t) => ({ ok: t.proxy.host === "203.0.113.7", latencyMs: 12 }),
    };
    const task = proxyHealthTask({ prober, concurrency: 2, sweepPeriodSeconds: 60 });
    // First probe: one success, below successThreshold 2 — no verdict, no report, no status change.
    const counts = await runSweepTask(task, ctx, [proxies]);
    expect(counts).toMatchObject({ probed: 2, reports: 0 });
    const at = now.getTime() / 1000;
    expect(gauges).toEqual(
      expect.arrayContaining([
        {
          name: "kubefn_proxy_last_probe_timestamp_seconds",
          value: at,
          labels: { namespace: "crawl", name: "a" },
        },
        {
          name: "kubefn_proxy_last_probe_timestamp_seconds",
          value: at,
          labels: { namespace: "crawl", name: "b" },
        },
        { name: "kubefn_proxy_probe_success", value: 1, labels: { namespace: "crawl", name: "a" } },
      ]),
    );
  });

  it("a Proxy that is not probed (no healthCheck) gets no recency series", async () => {
    const kube = new FakeKube();
    const bare = externalProxy("bare");
    (bare.spec as Record<string, unknown>).healthCheck = undefined;
    kube.seed(proxyResource, bare);
    const { ctx } = fakeContext(kube, { now });
    const gauges: string[] = [];
    ctx.metrics = { ...ctx.metrics, gauge: (name) => gauges.push(name) };
    const prober: Prober = { probe: async () => ({ ok: true, latencyMs: 1 }) };
    await runSweepTask(proxyHealthTask({ prober, concurrency: 1, sweepPeriodSeconds: 60 }), ctx, [[bare]]);
    expect(gauges).toEqual([]);
  });

  it("probes every intervalSeconds (CRD default 30 s): a 30 s Proxy is probed twice per 60 s sweep period", async () => {
    const kube = new FakeKube();
    const proxy = externalProxy("thirty");
    (proxy.spec as { healthCheck: Record<string, unknown> }).healthCheck.intervalSeconds = 30;
    kube.seed(proxyResource, proxy);
    let clock = now;
    const { ctx, recorded } = fakeContext(kube, { now });
    ctx.clock = { now: () => clock };
    const probedAt: number[] = [];
    const prober: Prober = {
      probe: async () => {
        probedAt.push(clock.getTime());
        return { ok: true, latencyMs: 5 };
      },
    };
    const task = proxyHealthTask({
      prober,
      concurrency: 2,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 40 },
    });
    // One sweep: nothing probed in it; two probe shards, 30 s apart, at the Proxy's own phase.
    expect(await runSweepTask(task, ctx, [[proxy]])).toMatchObject({ shards: 2, planned: 2 });
    const shards = [...recorded.sent];
    const delays = shards.map((s) => s.delaySeconds ?? 0);
    expect(probedAt).toEqual([]);
    expect(delays).toHaveLength(2);
    expect(delays[1]! - delays[0]!).toBe(30);
    expect(Math.max(...delays)).toBeLessThan(60);
    // The queue delivers each shard at its delay (the fake clock moves there); each probes it.
    // The first probe writes the counters; the second shard carries the same listed copy, but
    // the task writes over what its first write returned: no Conflict, no read, no extra probe.
    const counts: Record<string, number>[] = [];
    for (const sent of shards) {
      clock = new Date(now.getTime() + (sent.delaySeconds ?? 0) * 1000);
      counts.push(await task.handleShard(ctx, sent.jobs![0]!.job.objects));
    }
    expect(probedAt.map((t) => (t - now.getTime()) / 1000)).toEqual(delays);
    expect(counts.map((c) => [c.probed, c.writes, c.writeConflicts, c.retried])).toEqual([
      [1, 1, 0, 0],
      [1, 1, 0, 0],
    ]);
    // A Proxy at the 60 s period (interval = period) gets one shard per sweep.
    const minute = externalProxy("minute");
    (minute.spec as { healthCheck: Record<string, unknown> }).healthCheck.intervalSeconds = 60;
    recorded.sent.length = 0;
    clock = now;
    expect(await runSweepTask(task, ctx, [[minute]])).toMatchObject({ shards: 1, planned: 1 });
  });
});

describe("a sweep's probe shards reach the queue", () => {
  const thirtySecondProxies = (n: number) =>
    Array.from({ length: n }, (_, i) => {
      const p = externalProxy(`p${i}`);
      (p.spec as { healthCheck: Record<string, unknown> }).healthCheck.intervalSeconds = 30;
      return p;
    });
  const task = () =>
    proxyHealthTask({
      prober: { probe: async () => ({ ok: true, latencyMs: 5 }) },
      concurrency: 2,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 40 },
    });

  it("in one sendEach where the queue has it, each shard with its own delay — as sent one by one", async () => {
    const proxies = thirtySecondProxies(50);
    const oneByOne = fakeContext(new FakeKube(), { now });
    expect(await runSweepTask(task(), oneByOne.ctx, [proxies])).toMatchObject({ planned: 100 });
    const each: { message: unknown; delaySeconds: number }[][] = [];
    const batched = fakeContext(new FakeKube(), { now });
    batched.ctx.queue.sendEach = async (entries) => {
      each.push([...entries]);
    };
    const counts = await runSweepTask(task(), batched.ctx, [proxies]);
    expect(batched.recorded.sent).toEqual([]);
    expect(each).toHaveLength(1);
    expect(counts).toMatchObject({ shards: each[0]!.length, planned: 100, shardErrors: 0 });
    // The same shards at the same delays as the queue without sendEach got them.
    const view = (m: unknown, d: number | undefined) => [
      d ?? 0,
      (m as { job: { objects: unknown[] } }).job.objects,
    ];
    expect(each[0]!.map((e) => view(e.message, e.delaySeconds))).toEqual(
      oneByOne.recorded.sent.map((s) => view(s.jobs![0], s.delaySeconds)),
    );
  });

  it("a sendEach that fails counts every shard it carried as not sent, in one line", async () => {
    const { ctx } = fakeContext(new FakeKube(), { now });
    const errors: Record<string, unknown>[] = [];
    ctx.log = { ...ctx.log, error: (_msg, fields) => errors.push(fields ?? {}) };
    ctx.queue.sendEach = async () => {
      throw new Error("SendMessageBatch rejected 10 of 10 messages");
    };
    const counts = await runSweepTask(task(), ctx, [thirtySecondProxies(50)]);
    expect(counts).toMatchObject({ shards: 0, planned: 0 });
    expect(counts.shardErrors).toBeGreaterThan(1);
    expect(errors).toEqual([expect.objectContaining({ shard: 0, shards: counts.shardErrors, proxies: 100 })]);
  });
});

describe("a probe shard carries what a probe needs", () => {
  it("not the listed object: no annotations, managedFields or cloud-init; probed and written as the listed object would be", async () => {
    const kube = new FakeKube();
    const healthy = {
      type: "Healthy",
      status: "True",
      reason: "ProbeSucceeded",
      message: "probe succeeded in 3 ms",
      lastTransitionTime: now.toISOString(),
    };
    const listed = externalProxy("applied", {
      latencyMillis: 3,
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "Ready",
          message: "m",
          lastTransitionTime: now.toISOString(),
        },
        healthy,
      ],
    });
    Object.assign(listed.metadata, {
      labels: { team: "a" },
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(3_000) },
      managedFields: [{ manager: "kubectl", operation: "Apply", fieldsV1: { pad: "y".repeat(500) } }],
    });
    Object.assign(listed.spec as object, { cloudInit: { inline: "z".repeat(2_000) } });
    kube.seed(proxyResource, listed);
    const { ctx, recorded } = fakeContext(kube, { now });
    const probed: string[] = [];
    const prober: Prober = {
      probe: async (t) => {
        probed.push(`${t.proxy.host}:${t.proxy.port} ${t.url}`);
        return { ok: true, latencyMs: 5 };
      },
    };
    const task = proxyHealthTask({
      prober,
      concurrency: 2,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 40 },
    });
    await runSweepTask(task, ctx, [[listed]]);
    const carried = recorded.sent[0]!.jobs![0]!.job.objects[0]!;
    expect(JSON.stringify(carried).length).toBeLessThan(600);
    expect(carried.metadata).toEqual({
      namespace: "crawl",
      name: "applied",
      resourceVersion: "1",
    });
    expect(carried.spec).toEqual({
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128 },
      healthCheck: { probeURL: "http://example.com/", successThreshold: 2, failureThreshold: 3 },
    });
    expect(carried.status).toEqual({ latencyMillis: 3, conditions: [{ ...healthy, message: "" }] });
    // What a probe reads of it is what it reads of the listed object.
    expect(proxyHealthSubject(carried)).toEqual(proxyHealthSubject(listed));
    // A fresh task (another invocation) probes the carried copy and writes its health.
    const consumer = proxyHealthTask({
      prober,
      concurrency: 2,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 40 },
    });
    expect(await consumer.handleShard(ctx, [carried])).toMatchObject({
      probed: 1,
      writes: 1,
      writeConflicts: 0,
    });
    expect(probed).toEqual(["203.0.113.7:3128 http://example.com/"]);
  });
});

describe("a fanned-out sweep holds probe views, not the fleet (issue 32: Lambda's memory at 10,000 objects)", () => {
  it("a page's listed Proxies can be collected before the last page, while their shards wait for it", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const { ctx, recorded } = fakeContext(new FakeKube(), { now });
    const task = proxyHealthTask({
      prober: { probe: async () => ({ ok: true, latencyMs: 1 }) },
      concurrency: 2,
      sweepPeriodSeconds: 60,
      // Larger than a second's Proxies: every shard waits for the last page, as at 10,000 Proxies.
      fanOut: { shardSize: 400 },
    });
    const run = task.start(ctx, createSweepMemo(), { at: now });
    // Only weak references to the page outlive the call.
    const listed = await (async () => {
      const page = Array.from({ length: 50 }, (_, i) => externalProxy(`p-${i}`));
      await run.page(page);
      return page.map((p) => new WeakRef(p));
    })();
    await new Promise((r) => setImmediate(r));
    gc();
    expect(listed.filter((r) => r.deref() !== undefined)).toHaveLength(0);
    expect(await run.finish()).toMatchObject({ planned: 100 });
    const carried = recorded.sent.flatMap((m) => m.jobs ?? []).flatMap((j) => j.job.objects);
    expect(new Set(carried.map((o) => o.metadata.name)).size).toBe(50);
  });
});

describe("a late probe shard sheds what its next shard covers", () => {
  const proxiesAt = (intervalSeconds: number) =>
    Array.from({ length: 3 }, (_, i) => {
      const p = externalProxy(`p${intervalSeconds}-${i}`, { ip: "203.0.113.7" });
      Object.assign((p.spec as { healthCheck: object }).healthCheck, { intervalSeconds });
      return p;
    });

  async function deliver(lateMs: number, proxies: KubeObject[]) {
    const kube = new FakeKube();
    for (const p of proxies) kube.seed(proxyResource, p);
    const { ctx } = fakeContext(kube, { now });
    let probes = 0;
    const prober: Prober = {
      probe: async () => {
        probes++;
        return { ok: true, latencyMs: 1 };
      },
    };
    const task = proxyHealthTask({ prober, concurrency: 6, sweepPeriodSeconds: 60, confirmDelayMs: 0 });
    const counts = await task.handleShard(ctx, proxies, undefined, { due: now.getTime() - lateMs });
    return { probes, counts };
  }

  it.each([
    ["on time", 0, 30, 3, 0],
    ["15 s late (the limit)", 15_000, 30, 3, 0],
    ["20 s late, 30 s Proxies: their next shard is 10 s away", 20_000, 30, 0, 3],
    ["20 s late, 300 s Proxies: their next shard is minutes away", 20_000, 300, 3, 0],
    ["200 s late, 300 s Proxies", 200_000, 300, 0, 3],
  ])("%s: %i ms late, %i s interval → %i probed, %i shed", async (_what, lateMs, interval, probed, shed) => {
    const { probes, counts } = await deliver(lateMs, proxiesAt(interval));
    expect(probes).toBe(probed);
    expect(counts.shed ?? 0).toBe(shed);
  });

  it("a 0.1.0 shard (no due time) is probed whole", async () => {
    const kube = new FakeKube();
    const proxies = proxiesAt(30);
    for (const p of proxies) kube.seed(proxyResource, p);
    const { ctx } = fakeContext(kube, { now });
    let probes = 0;
    const task = proxyHealthTask({
      prober: {
        probe: async () => {
          probes++;
          return { ok: true, latencyMs: 1 };
        },
      },
      concurrency: 6,
      sweepPeriodSeconds: 60,
      confirmDelayMs: 0,
    });
    await task.handleShard(ctx, proxies);
    expect(probes).toBe(3);
  });
});

describe("a latency report costs one status patch, no pass", () => {
  const reportedAt = "2026-11-30T11:50:00.000Z";
  const converged = (latencyMs: number): KubeObject => {
    const p = externalProxy("steady", {
      observedGeneration: 1,
      phase: "Ready",
      ip: "203.0.113.7",
      latencyMillis: latencyMs,
      lastHealthCheckTime: "2026-11-30T11:50:00Z",
      conditions: [
        {
          type: "Provisioned",
          status: "True",
          reason: "ExternalEndpoint",
          message: "",
          observedGeneration: 1,
          lastTransitionTime: reportedAt,
        },
        {
          type: "Healthy",
          status: "True",
          reason: "ProbeSucceeded",
          message: "probes through the proxy succeed",
          observedGeneration: 1,
          lastTransitionTime: reportedAt,
        },
        {
          type: "Ready",
          status: "True",
          reason: "Healthy",
          message: "probes through the proxy succeed",
          observedGeneration: 1,
          lastTransitionTime: reportedAt,
        },
      ],
      health: encodeHealthState({
        instance: "203.0.113.7:3128",
        verdict: true,
        consecOK: 2,
        consecFail: 0,
        reported: { healthy: true, latencyMs, at: reportedAt },
      }),
    });
    p.metadata.generation = 1;
    return p;
  };

  it("writes latency, time and counters in one patch; the drift decision then sees nothing to do", async () => {
    const kube = new FakeKube();
    kube.seed(proxyResource, converged(10));
    const { ctx, recorded } = fakeContext(kube, { now });
    const prober: Prober = { probe: async () => ({ ok: true, latencyMs: 300 }) };
    const task = proxyHealthTask({ prober, concurrency: 1, sweepPeriodSeconds: 60, confirmDelayMs: 0 });
    const counts = await task.handleShard(ctx, [converged(10)]);
    expect(counts).toMatchObject({ probed: 1, confirmations: 2, reports: 1, writes: 1 });
    expect(recorded.sent).toEqual([]);
    const writes = kube.calls.filter((c) => c.method !== "get" && c.method !== "list");
    expect(writes.map((c) => c.method)).toEqual(["patchStatus"]);
    const after = await kube.get(proxyResource, { namespace: "crawl", name: "steady" });
    // 000 §6: the figure is the median of three probes, and status says how many (1 = the seed's).
    expect(after.status).toMatchObject({
      latencyMillis: 300,
      latencySamples: 3,
      lastHealthCheckTime: "2026-11-30T12:00:00Z",
    });
    const shared = {
      instancesIn: async () => undefined,
      providers: new Set<string>(),
      desiredHash: async () => "",
    };
    expect(await proxyDriftReason(after, shared)).toBeUndefined();
  });

  it("jitter in one probe writes nothing", async () => {
    const kube = new FakeKube();
    kube.seed(proxyResource, converged(10));
    const { ctx, recorded } = fakeContext(kube, { now });
    const latencies = [95, 9, 11];
    const prober: Prober = { probe: async () => ({ ok: true, latencyMs: latencies.shift() ?? 10 }) };
    const task = proxyHealthTask({ prober, concurrency: 1, sweepPeriodSeconds: 60, confirmDelayMs: 0 });
    expect(await task.handleShard(ctx, [converged(10)])).toMatchObject({
      reports: 0,
      writes: 0,
      confirmations: 1,
    });
    expect(recorded.sent).toEqual([]);
    expect(kube.calls.filter((c) => c.method !== "get" && c.method !== "list")).toEqual([]);
  });

  it("drift: a reported verdict that status does not show yet gets a pass (reason health)", async () => {
    const p = converged(10);
    const status = p.status as { conditions: { type: string }[] };
    status.conditions = status.conditions.filter((c) => c.type !== "Healthy");
    const shared = {
      instancesIn: async () => undefined,
      providers: new Set<string>(),
      desiredHash: async () => "",
    };
    expect(await proxyDriftReason(p, shared)).toBe("health");
    expect(await proxyDriftReason(converged(10), shared)).toBeUndefined();
  });
});

describe("probe cadence at the minute seams (cron jitter, a fake clock)", () => {
  it("an hour of sweeps whose cron fires 0–2.9 s late and lists for 1.3 s: no probe doubled or skipped, each on its rhythm", async () => {
    const intervals = [7, 30, 45, 60, 90];
    const proxies = Array.from({ length: 25 }, (_, i) => {
      const p = externalProxy(`p${i}`);
      Object.assign((p.spec as { healthCheck: object }).healthCheck, { intervalSeconds: intervals[i % 5] });
      return p;
    });
    const start = Date.parse("2026-11-30T12:00:00Z");
    let clock = start;
    const kube = new FakeKube();
    const { ctx } = fakeContext(kube);
    ctx.clock = { now: () => new Date(clock) };
    /** Each Proxy's probes: when its shard was due, and when its message fires (sent at + delay). */
    const probes = new Map<string, { due: number; fires: number }[]>();
    ctx.queue.send = async (messages, delaySeconds = 0) => {
      for (const m of messages)
        for (const o of m.kind === "job" ? m.job.objects : []) {
          const name = (o as KubeObject).metadata.name!;
          const probe = {
            due: (m.kind === "job" && m.job.due) || Number.NaN,
            fires: clock + delaySeconds * 1000,
          };
          probes.set(name, [...(probes.get(name) ?? []), probe]);
        }
    };
    const task = proxyHealthTask({
      prober: { probe: async () => ({ ok: true, latencyMs: 1 }) },
      concurrency: 4,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 40 },
    });
    for (let k = 0; k < 60; k++) {
      const scheduled = start + k * 60_000;
      // The invocation starts late by a jitter that moves across whole seconds from run to run.
      clock = scheduled + ((k * 7919) % 30) * 100;
      const listing = (async function* () {
        clock += 1300; // the listing took 1.3 s: shards are sent after it
        yield proxies;
      })();
      await runSweepTask(task, ctx, listing, undefined, { at: new Date(scheduled) });
    }
    for (const [i, p] of proxies.entries()) {
      const interval = intervals[i % 5]!;
      const seen = (probes.get(p.metadata.name!) ?? []).sort((x, y) => x.due - y.due);
      const dues = seen.map((x) => x.due / 1000);
      // Planned on the Proxy's rhythm across every seam: no due time twice, none missing.
      expect(
        new Set(dues.slice(1).map((t, j) => t - dues[j]!)),
        `${p.metadata.name} every ${interval} s`,
      ).toEqual(new Set([interval]));
      expect(dues.length).toBeGreaterThanOrEqual(Math.floor(3600 / interval));
      expect(dues.length).toBeLessThanOrEqual(Math.ceil(3600 / interval));
      // Each fires at its due time (to the second), or as soon as sent when the sweep ran past it.
      for (const { due, fires } of seen) {
        expect(fires - due).toBeGreaterThanOrEqual(-500);
        expect(fires - due).toBeLessThanOrEqual(2900 + 1300 + 500);
      }
    }
  });
});
