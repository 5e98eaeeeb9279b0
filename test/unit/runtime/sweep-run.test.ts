import { describe, expect, it } from "vitest";
import type { Kube, KubeObject, ListOptions, ListPage } from "../../../shared/kube/port.ts";
import { dueThisSlot } from "../../../shared/runtime/definition/index.ts";
import { createRegistry, defineDrift, runSweep, type SweepTask } from "../../../shared/runtime/index.ts";
import { fakeContext } from "../../support/fake-kube.ts";
import { proxyController, SubPoolResource, subPoolController } from "./controllers.ts";

/** A Kube whose lists page `pageSize` at a time and record their options. */
function pagedKube(objects: KubeObject[]): Kube & { lists: ListOptions[] } {
  const lists: ListOptions[] = [];
  return {
    lists,
    async list<T extends KubeObject>(_res: unknown, opts: ListOptions = {}): Promise<ListPage<T>> {
      lists.push(opts);
      const start = opts.continue ? Number(opts.continue) : 0;
      const end = start + (opts.limit ?? 500);
      const page: ListPage<T> = { items: objects.slice(start, end) as T[], resourceVersion: "9" };
      if (end < objects.length) page.continue = String(end);
      return page;
    },
  } as unknown as Kube & { lists: ListOptions[] };
}

const pool = (i: number): KubeObject => ({
  apiVersion: "subrelay.example.com/v1alpha1",
  kind: "SubPool",
  metadata: { name: `p${i}`, uid: `uid-${i}`, generation: 1 },
});
const now = new Date("2026-11-30T12:00:00Z");

describe("runSweep", () => {
  it("pages through the primaries from the watch cache and asks the decision of each, one page at a time", async () => {
    const kube = pagedKube(Array.from({ length: 25 }, (_, i) => pool(i)));
    const { ctx, recorded } = fakeContext(kube, { now });
    const decided: string[] = [];
    const registry = createRegistry([
      subPoolController({
        resyncSeconds: 60,
        drift: defineDrift({
          decide: ({ primary }) => {
            decided.push(primary.metadata.name!);
            return primary.metadata.name === "p7" ? "missing:ConfigMap" : undefined;
          },
        }),
      }),
    ]);
    const summary = await runSweep(ctx, registry, [], {
      shardSize: 100,
      attachListed: false,
      pageSize: 10,
      safetyNetSeconds: 7 * 86_400,
    });
    expect(kube.lists.map((o) => [o.resourceVersion, o.continue, o.limit])).toEqual([
      ["0", undefined, 10],
      [undefined, "10", 10],
      [undefined, "20", 10],
    ]);
    expect(decided).toHaveLength(25);
    expect(recorded.sent.flatMap((s) => s.messages)).toEqual([
      {
        request: { controller: "subpool", name: "p7" },
        attempt: 0,
        uid: "uid-7",
        trigger: { kind: "drift", reason: "missing:ConfigMap" },
      },
    ]);
    expect(summary.controllers.subpool).toMatchObject({
      listed: 25,
      due: 1,
      drift: true,
      reasons: { "drift:missing:ConfigMap": 1 },
    });
  });

  it("a perPage drift list is listed once per page of primaries, selected by the page's values", async () => {
    const kube = pagedKube(Array.from({ length: 25 }, (_, i) => pool(i)));
    const { ctx } = fakeContext(kube, { now });
    const registry = createRegistry([
      subPoolController({
        resyncSeconds: 60,
        drift: defineDrift({
          lists: [
            {
              name: "configmaps",
              resource: {
                group: "",
                version: "v1",
                resource: "configmaps",
                kind: "ConfigMap",
                namespaced: true,
              },
              labelSelector: "managed=yes",
              perPage: { label: "pool", value: (p) => p.metadata.name },
            },
          ],
          decide: () => undefined,
        }),
      }),
    ]);
    await runSweep(ctx, registry, [], {
      shardSize: 100,
      attachListed: false,
      pageSize: 10,
      safetyNetSeconds: 7 * 86_400,
    });
    // (This Kube answers every list with the pools, so each owned list pages too: first pages only.)
    const owned = kube.lists.filter((o) => o.labelSelector && !o.continue).map((o) => o.labelSelector);
    expect(owned).toEqual([
      "managed=yes,pool in (p0,p1,p2,p3,p4,p5,p6,p7,p8,p9)",
      "managed=yes,pool in (p10,p11,p12,p13,p14,p15,p16,p17,p18,p19)",
      "managed=yes,pool in (p20,p21,p22,p23,p24)",
    ]);
  });

  it("the safety net sends each object once over its interval, spread across slots", async () => {
    const objects = Array.from({ length: 200 }, (_, i) => pool(i));
    const perObject = new Map<string, number>();
    const slots = 24 * 60; // a day of one-minute slots
    let busiest = 0;
    for (let slot = 0; slot < slots; slot++) {
      const at = new Date(now.getTime() + slot * 60_000);
      const due = objects.filter((o) => dueThisSlot(o, at, 86_400, 60));
      busiest = Math.max(busiest, due.length);
      for (const o of due) perObject.set(o.metadata.name!, (perObject.get(o.metadata.name!) ?? 0) + 1);
    }
    expect([...perObject.values()].every((n) => n === 1)).toBe(true);
    expect(perObject.size).toBe(200);
    expect(busiest).toBeLessThanOrEqual(3);
  });

  it.each([
    ["a host's first sweep sends every object with trigger start", { full: true }, "start", 3],
    [
      "a controller without a drift declaration: every object once per resync, reason resync",
      {},
      "drift:resync",
      3,
    ],
  ])("%s", async (_, extra, trigger, expected) => {
    const kube = pagedKube([pool(1), pool(2), pool(3)]);
    const { ctx, recorded } = fakeContext(kube, { now });
    const registry = createRegistry([subPoolController({ resyncSeconds: 60 })]);
    await runSweep(ctx, registry, [], {
      shardSize: 2,
      attachListed: false,
      safetyNetSeconds: 7 * 86_400,
      ...extra,
    });
    const sent = recorded.sent.flatMap((s) => s.messages);
    expect(sent).toHaveLength(expected);
    expect(
      new Set(
        sent.map((m) => (m.trigger?.reason ? `${m.trigger.kind}:${m.trigger.reason}` : m.trigger?.kind)),
      ),
    ).toEqual(new Set([trigger]));
  });

  it("a decision that throws still sends the pass (decide-error); a failed load sends none and is counted", async () => {
    const kube = pagedKube([pool(1)]);
    const { ctx, recorded } = fakeContext(kube, { now });
    const throwing = createRegistry([
      subPoolController({
        resyncSeconds: 60,
        drift: defineDrift({
          decide: () => {
            throw new Error("boom");
          },
        }),
      }),
    ]);
    await runSweep(ctx, throwing, [], { shardSize: 10, attachListed: false, safetyNetSeconds: 7 * 86_400 });
    expect(recorded.sent.flatMap((s) => s.messages).map((m) => m.trigger)).toEqual([
      { kind: "drift", reason: "decide-error" },
    ]);

    recorded.sent.length = 0;
    const failingLoad = createRegistry([
      subPoolController({
        resyncSeconds: 60,
        drift: defineDrift({
          load: async () => {
            throw new Error("config unreadable");
          },
          decide: () => "never",
        }),
      }),
    ]);
    await runSweep(ctx, failingLoad, [], {
      shardSize: 10,
      attachListed: false,
      safetyNetSeconds: 7 * 86_400,
    });
    expect(recorded.sent).toEqual([]);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_sweep_errors_total",
      labels: { controller: "subpool", stage: "load" },
    });
  });

  it("without intake (no seal), a new object is sent its first pass by the next sweep, not at its drift period", async () => {
    // A Site-like controller: drift every 5 minutes, and a sweep that is not in a drift minute.
    const at = new Date("2026-11-30T12:01:30Z");
    const created = (name: string, when: string, status?: Record<string, unknown>): KubeObject => ({
      ...pool(0),
      metadata: { name, uid: `uid-${name}`, generation: 1, creationTimestamp: when },
      ...(status ? { status } : {}),
    });
    const kube = pagedKube([
      created("fresh", "2026-11-30T12:01:29Z"),
      created("reconciled", "2026-11-30T12:01:29Z", { conditions: [{ type: "Ready", status: "True" }] }),
      // Created long ago and never reconciled (a namespace kubefn may not write to): its drift period, as before.
      created("old", "2026-11-30T11:00:00Z"),
    ]);
    const registry = createRegistry([
      subPoolController({ resyncSeconds: 300, drift: defineDrift({ decide: () => "no-conditions" }) }),
    ]);
    const sweep = async (ctx: Parameters<typeof runSweep>[0]) => {
      const summary = await runSweep(ctx, registry, [], {
        shardSize: 10,
        attachListed: false,
        periodSeconds: 10,
        safetyNetSeconds: 10 * 365 * 86_400,
      });
      return summary;
    };
    const unsealed = fakeContext(kube, { now: at });
    const summary = await sweep(unsealed.ctx);
    expect(summary.controllers.subpool?.drift).toBe(false);
    expect(unsealed.recorded.sent.flatMap((s) => s.messages).map((m) => [m.request.name, m.trigger])).toEqual(
      [["fresh", { kind: "drift", reason: "new" }]],
    );
    // With a seal, intake runs: the creation event brings the new object's first pass; the old
    // empty status is one blanked by someone (status-seal.test.ts).
    const sealed = fakeContext(kube, { now: at });
    await sweep({ ...sealed.ctx, seal: { seal: async () => "", verify: async () => "sealed" } });
    expect(sealed.recorded.sent.flatMap((s) => s.messages).map((m) => [m.request.name, m.trigger])).toEqual([
      ["old", { kind: "drift", reason: "empty-status" }],
    ]);
  });

  it("drift lists run once per drift period, not at every sweep", async () => {
    const kube = pagedKube([]);
    const registry = createRegistry([
      proxyController({
        resyncSeconds: 300,
        drift: defineDrift({ lists: [{ name: "x", resource: SubPoolResource }], decide: () => undefined }),
      }),
    ]);
    let withDrift = 0;
    for (let minute = 0; minute < 10; minute++) {
      const { ctx } = fakeContext(kube, { now: new Date(now.getTime() + minute * 60_000) });
      const summary = await runSweep(ctx, registry, [], { shardSize: 10, attachListed: false });
      if (summary.controllers.proxy?.drift) withDrift++;
    }
    expect(withDrift).toBe(2);
  });

  it("a task `withDrift` runs only in the drift's sweeps (and a full one); the others at every sweep", async () => {
    const kube = pagedKube([]);
    const registry = createRegistry([
      proxyController({
        resyncSeconds: 300,
        drift: defineDrift({ lists: [{ name: "x", resource: SubPoolResource }], decide: () => undefined }),
      }),
    ]);
    const started: string[] = [];
    const task = (name: string, withDrift: boolean): SweepTask => ({
      name,
      controller: "proxy",
      withDrift,
      start: () => {
        started.push(name);
        return { page: async () => undefined, finish: async () => ({}) };
      },
    });
    const tasks = [task("every", false), task("drift", true)];
    for (let minute = 0; minute < 10; minute++) {
      const { ctx } = fakeContext(kube, { now: new Date(now.getTime() + minute * 60_000) });
      await runSweep(ctx, registry, tasks, { shardSize: 10, attachListed: false });
    }
    expect(started.filter((n) => n === "every")).toHaveLength(10);
    expect(started.filter((n) => n === "drift")).toHaveLength(2);
    const { ctx } = fakeContext(kube, { now: new Date(now.getTime() + 60_000) });
    await runSweep(ctx, registry, tasks, { shardSize: 10, attachListed: false, full: true });
    expect(started.filter((n) => n === "drift")).toHaveLength(3);
  });

  it("a read shared through the sweep memo is made once for the drift load and the tasks", async () => {
    const kube = pagedKube([pool(1)]);
    const { ctx } = fakeContext(kube, { now });
    let reads = 0;
    const instances = () => {
      reads++;
      return Promise.resolve(["i-1"]);
    };
    const registry = createRegistry([
      subPoolController({
        resyncSeconds: 60,
        drift: defineDrift({
          load: (_ctx, memo) => memo.once("instances", instances),
          decide: () => undefined,
        }),
      }),
    ]);
    const task: SweepTask = {
      name: "collector",
      controller: "subpool",
      start: (_ctx, memo) => ({
        page: async () => undefined,
        finish: async () => ({ seen: (await memo.once("instances", instances)).length }),
      }),
    };
    const summary = await runSweep(ctx, registry, [task], { shardSize: 10, attachListed: false });
    expect(summary.tasks.collector).toEqual({ seen: 1 });
    expect(reads).toBe(1);
  });
});
