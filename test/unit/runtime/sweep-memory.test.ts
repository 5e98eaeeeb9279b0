/**
 * The sweep never holds the fleet: the production operators (createOperators: Proxy with its health
 * fan-out, phase gauge, lease and orphan tasks; SubPool with its per-page drift lists; Site) are
 * swept over thousands of Proxies and SubPools served page by page by a Kube that tracks every
 * object it hands out with a WeakRef. Each time a page of primaries is listed it collects garbage
 * and counts the objects of pages before the previous one that are still alive.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { operatorSettingsFrom } from "../../../shared/app/operator-settings.ts";
import { createOperators } from "../../../shared/app/operators.ts";
import { proxyResource } from "../../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../../shared/controllers/subpool/api.ts";
import { subPoolObjectNames } from "../../../shared/controllers/subpool/desired.ts";
import { parseLabelSelector } from "../../../shared/kube/label-selector.ts";
import type { Kube, KubeObject, ListOptions, ListPage, Resource } from "../../../shared/kube/port.ts";
import { runSweep, type SweepTask } from "../../../shared/runtime/index.ts";
import { fakeContext } from "../../support/fake-kube.ts";
import { subPoolObject } from "../../support/subpools.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const now = new Date("2026-12-01T00:00:00Z");
const PAGE = 100;

/**
 * A Kube serving `proxies` Proxies and `pools` SubPools, `limit` at a time by continue token, and
 * for a list selected by `subrelay.example.com/pool in (…)` one derived object per named pool.
 * Every other list is empty. `oldAlive` is the most objects of primary pages older than the
 * previous one seen alive at any primary page.
 */
function trackingKube(counts: { proxies: number; pools: number }) {
  // Pages are counted per primary kind: the controllers' sweeps may interleave, and a SubPool page
  // in work is not old because Proxy pages were listed meanwhile.
  type Kind = "proxy" | "pool";
  const tracked: { ref: WeakRef<object>; kind: Kind; page: number }[] = [];
  const pagesOf: Record<Kind, number> = { proxy: 0, pool: 0 };
  let primaryPages = 0;
  const stats = {
    primaryPages: 0,
    served: 0,
    /** Per kind, the most objects of that kind's pages before its previous one alive at once. */
    oldAlive: { proxy: 0, pool: 0 } as Record<Kind, number>,
    /** Per kind, the most objects served for one of its pages (a pool page brings its drift lists). */
    largestPage: { proxy: 0, pool: 0 } as Record<Kind, number>,
  };
  const servedFor = new Map<string, number>();
  const track = <T extends object>(o: T, kind: Kind): T => {
    tracked.push({ ref: new WeakRef(o), kind, page: pagesOf[kind] });
    stats.served++;
    const key = `${kind}/${pagesOf[kind]}`;
    servedFor.set(key, (servedFor.get(key) ?? 0) + 1);
    stats.largestPage[kind] = Math.max(stats.largestPage[kind], servedFor.get(key) ?? 0);
    return o;
  };
  const proxy = (i: number): KubeObject => ({
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      namespace: "crawl",
      name: `px-${i}`,
      uid: `uid-px-${i}`,
      generation: 1,
      resourceVersion: "5",
    },
    spec: {
      mode: "External",
      endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" },
      healthCheck: { probeURL: "http://127.0.0.1:8080/", intervalSeconds: 30 },
    },
    status: { phase: "Ready", ip: "127.0.0.1", observedGeneration: 1 },
  });
  const pool = (i: number): KubeObject => subPoolObject({}, { name: `pool-${i}`, uid: `uid-pool-${i}` });
  const kube = {
    async list<T extends KubeObject>(res: Resource, opts: ListOptions = {}): Promise<ListPage<T>> {
      const total =
        res.resource === proxyResource.resource ? counts.proxies : res === subPoolResource ? counts.pools : 0;
      const make = res.resource === proxyResource.resource ? proxy : pool;
      if (total > 0 && res.group === (res.resource === "proxies" ? proxyResource : subPoolResource).group) {
        const kind: Kind = make === proxy ? "proxy" : "pool";
        primaryPages++;
        pagesOf[kind]++;
        stats.primaryPages = primaryPages;
        // A fresh job, so no WeakRef target is kept for the current one; then count the survivors.
        await new Promise((r) => setImmediate(r));
        gc();
        for (const k of ["proxy", "pool"] as const) {
          const alive = tracked.filter(
            (t) => t.kind === k && t.page < pagesOf[k] - 2 && t.ref.deref() !== undefined,
          ).length;
          stats.oldAlive[k] = Math.max(stats.oldAlive[k], alive);
        }
        const start = opts.continue ? Number(opts.continue) : 0;
        const end = Math.min(total, start + (opts.limit ?? total));
        const items = Array.from({ length: end - start }, (_, k) => track(make(start + k), kind));
        return { items: items as T[], ...(end < total ? { continue: String(end) } : {}) } as ListPage<T>;
      }
      const selector = parseLabelSelector(opts.labelSelector ?? "");
      const byPool = selector.ok
        ? selector.requirements.find((r) => r.key === "subrelay.example.com/pool" && r.operator === "In")
        : undefined;
      const items = (byPool?.values ?? []).map((id) =>
        track(
          {
            apiVersion: "v1",
            kind: res.kind,
            metadata: {
              name: res.namespaced ? `${id}-owned` : subPoolObjectNames(id).namespace,
              ...(res.namespaced ? { namespace: subPoolObjectNames(id).namespace } : {}),
              labels: { "subrelay.example.com/pool": id, "app.kubernetes.io/managed-by": "subpool-operator" },
            },
          },
          "pool",
        ),
      );
      return { items: items as unknown as T[] } as ListPage<T>;
    },
    async get() {
      throw Object.assign(new Error("not found"), { code: 404 });
    },
  } as unknown as Kube;
  return { kube, stats };
}

/** The operators' default settings, with Proxies resynced every `seconds` (PROXY_RESYNC_SECONDS). */
function settingsWithResync(seconds: number) {
  const parsed = operatorSettingsFrom(
    { PROXY_RESYNC_SECONDS: seconds } as Parameters<typeof operatorSettingsFrom>[0],
    [],
  );
  if (!parsed.ok) throw new Error(parsed.issues.join("\n"));
  return parsed.settings;
}

async function sweepFleet(extraTasks: SweepTask[] = []) {
  const { kube, stats } = trackingKube({ proxies: 4000, pools: 1000 });
  const { ctx } = fakeContext(kube, { now });
  let messages = 0;
  // Counts and drops every message: a queue that kept them would keep their objects.
  ctx.queue = {
    send: async (batch) => {
      messages += batch.length;
    },
  };
  const ops = createOperators({
    prober: { probe: async () => ({ ok: true, latencyMs: 1 }) },
    sweepPeriodSeconds: 60,
    probeShardSize: 2,
    settings: settingsWithResync(60),
  });
  const summary = await runSweep(ctx, ops.registry, [...ops.sweepTasks, ...extraTasks], {
    shardSize: 100,
    attachListed: true,
    pageSize: PAGE,
  });
  return { stats, summary, messages };
}

describe("the sweep holds a page, not the fleet", () => {
  it("4,000 Proxies and 1,000 SubPools in pages of 100: objects of older pages are collected", {
    timeout: 60_000,
  }, async () => {
    const { stats, summary, messages } = await sweepFleet();
    console.log(
      `sweep memory: ${stats.served} objects served over ${stats.primaryPages} primary pages; ` +
        `at most ${stats.oldAlive.proxy} Proxies and ${stats.oldAlive.pool} SubPool objects of pages older ` +
        `than the previous one alive at once (largest pages ${stats.largestPage.proxy} and ` +
        `${stats.largestPage.pool}); ${messages} messages`,
    );
    expect(summary.controllers.proxy?.listed).toBe(4000);
    expect(summary.controllers.subpool?.listed).toBe(1000);
    expect(summary.controllers.subpool?.drift).toBe(true);
    // Every Proxy is planned into probe shards (30 s: twice a sweep).
    expect(summary.tasks["proxy-health"]).toMatchObject({ planned: 8000, shardErrors: 0 });
    expect(stats.primaryPages).toBe(50);
    // Bounded extras: one partly filled probe shard per delay (60 delays × (2 − 1) Proxies), and
    // pages V8 releases late: it releases a finished page some pages late at times (async frames and promise reactions of
    // the previous pages' work), so up to two late pages are allowed: a bound in pages, not in fleet.
    expect(stats.oldAlive.proxy).toBeLessThanOrEqual(60 + 2 * stats.largestPage.proxy);
    expect(stats.oldAlive.pool).toBeLessThanOrEqual(2 * stats.largestPage.pool);
  });

  it("the measure can fail: a task that keeps every page it is given is seen holding the fleet", {
    timeout: 60_000,
  }, async () => {
    const hoard: unknown[] = [];
    const hoarding: SweepTask = {
      name: "hoard",
      controller: "proxy",
      start: () => ({
        page: async (page) => void hoard.push(...page),
        finish: async () => ({ kept: hoard.length }),
      }),
    };
    const { stats } = await sweepFleet([hoarding]);
    expect(stats.oldAlive.proxy).toBeGreaterThan(3000);
  });
});
