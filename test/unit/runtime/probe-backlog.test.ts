/**
 * A host that falls behind its probe shards must not pile them up: a sweep's shard replaces the
 * one the last sweep sent for the same slot if that one still waits (the Node host's queue keys
 * messages by name). Found by the 9,000-Proxy fleet bench: the host's queue held 13,500 ready
 * messages, more than there were objects, and the passes that turn a first health report into
 * Ready waited behind them.
 */

import { describe, expect, it } from "vitest";
import { WorkQueue } from "../../../functions/node/work-queue.ts";
import { proxyHealthTask } from "../../../shared/controllers/proxy/health-task.ts";
import type { Prober } from "../../../shared/health/index.ts";
import type { KubeObject } from "../../../shared/kube/index.ts";
import { runSweepTask } from "../../../shared/runtime/sweep/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";

const start = new Date("2026-11-30T12:00:00Z");

function proxy(i: number, intervalSeconds: number): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "crawl", name: `p-${i}`, uid: `uid-${i}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128 },
      healthCheck: { probeURL: "http://example.com/", intervalSeconds },
    },
  };
}

describe("probe shards on a host that falls behind", () => {
  it("a second sweep's shards replace the first one's still waiting: the backlog stays one sweep deep", async () => {
    // A stalled host: one pass at a time, and the one running never ends; no timer ever fires.
    const queue = new WorkQueue({
      concurrency: 1,
      handle: () => new Promise(() => {}),
      setTimer: () => undefined,
      clearTimer: () => {},
    });
    let clock = start;
    const { ctx } = fakeContext(new FakeKube());
    ctx.clock = { now: () => clock };
    ctx.queue = queue;
    const prober: Prober = { probe: async () => ({ ok: true, latencyMs: 5 }) };
    const task = proxyHealthTask({
      prober,
      concurrency: 6,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 10 },
    });
    const fleet = [
      ...Array.from({ length: 300 }, (_, i) => proxy(i, 30)),
      ...Array.from({ length: 100 }, (_, i) => proxy(300 + i, 60)),
    ];
    const pages = [fleet.slice(0, 200), fleet.slice(200)];

    const first = (await runSweepTask(task, ctx, pages)) as { shards: number };
    const waiting = () => {
      const s = queue.stats();
      return s.ready + s.running + s.delayed;
    };
    expect(waiting()).toBe(first.shards);
    for (let sweep = 1; sweep <= 3; sweep++) {
      clock = new Date(start.getTime() + sweep * 60_000);
      const again = (await runSweepTask(task, ctx, pages)) as { shards: number };
      expect(again.shards).toBe(first.shards);
      // The one running shard is never replaced; everything else is the newest sweep's.
      expect(waiting()).toBeLessThanOrEqual(first.shards + 1);
    }
  });
});
