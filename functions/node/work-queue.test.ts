import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import type { JobMessage, Message, PassMessage } from "../../shared/runtime/index.ts";
import { WorkQueue } from "./work-queue.ts";

const nameOf = (m: Message) => (m.kind === "job" ? m.job.slot : m.request.name);
const attemptOf = (m: Message) => (m.kind === "job" ? -1 : m.attempt);

const msg = (name: string, attempt = 0): PassMessage => ({
  request: { controller: "c", namespace: "ns", name },
  attempt,
});

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

describe("WorkQueue", () => {
  it("hands the messages of one send over with one batch, and another send's with another", async () => {
    const batches = new Map<string, object>();
    const q = new WorkQueue({
      concurrency: 2,
      handle: async (m, batch) => void batches.set(nameOf(m), batch),
    });
    await q.send([msg("a"), msg("b"), msg("c")]);
    await q.send([msg("d")]);
    await q.idle();
    expect(batches.get("a")).toBe(batches.get("b"));
    expect(batches.get("a")).toBe(batches.get("c"));
    expect(batches.get("d")).not.toBe(batches.get("a"));
  });

  it("never runs two passes for one key at once and collapses events that arrive during a pass", async () => {
    const g = gate();
    let running = 0;
    let maxRunning = 0;
    const seen: Message[] = [];
    const q = new WorkQueue({
      concurrency: 4,
      handle: async (m) => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        seen.push(m);
        if (seen.length === 1) await g.opened;
        running--;
      },
    });
    await q.send([msg("a")]);
    await q.send([msg("a", 1), msg("a", 2), msg("a", 3)]);
    g.open();
    await q.idle();
    expect(maxRunning).toBe(1);
    expect(seen.map(attemptOf)).toEqual([0, 3]);
  });

  it("runs different keys side by side up to the concurrency limit", async () => {
    const g = gate();
    let running = 0;
    let maxRunning = 0;
    const q = new WorkQueue({
      concurrency: 2,
      handle: async () => {
        running++;
        maxRunning = Math.max(maxRunning, running);
        await g.opened;
        running--;
      },
    });
    await q.send([msg("a"), msg("b"), msg("c"), msg("d")]);
    expect(q.stats()).toEqual({ ready: 2, running: 2, delayed: 0 });
    g.open();
    await q.idle();
    expect(maxRunning).toBe(2);
  });

  it("probe shards have their own lane: passes at the limit do not hold them back, nor they the passes", async () => {
    const passes = gate();
    const shards = gate();
    const started: string[] = [];
    const shard = (i: number): JobMessage => ({
      kind: "job",
      job: { controller: "proxy", task: "probe", slot: `0-${i}`, objects: [] },
    });
    const q = new WorkQueue({
      concurrency: 2,
      shardConcurrency: 3,
      handle: async (m) => {
        started.push(nameOf(m));
        await (m.kind === "job" ? shards.opened : passes.opened);
      },
    });
    await q.send([msg("a"), msg("b"), msg("c")]);
    await q.send([0, 1, 2, 3, 4].map(shard));
    // Two passes run (their limit), and three shards beside them (theirs), though the passes came first.
    expect(started.sort()).toEqual(["0-0", "0-1", "0-2", "a", "b"]);
    expect(q.stats()).toEqual({ ready: 3, running: 5, delayed: 0 });
    shards.open();
    await new Promise((r) => setTimeout(r, 0));
    expect(started).toContain("0-4");
    expect(started).not.toContain("c");
    passes.open();
    await q.idle();
    expect(started).toContain("c");
  });

  it("keeps only the earliest delayed follow-up per key", async () => {
    const timers: Array<{ fn: () => void; ms: number; cleared: boolean }> = [];
    const ran: number[] = [];
    const q = new WorkQueue({
      concurrency: 1,
      handle: async (m) => {
        ran.push(attemptOf(m));
      },
      setTimer: (fn, ms) => {
        const t = { fn, ms, cleared: false };
        timers.push(t);
        return t;
      },
      clearTimer: (h) => {
        (h as { cleared: boolean }).cleared = true;
      },
    });
    await q.send([msg("a", 1)], 30);
    await q.send([msg("a", 2)], 60);
    await q.send([msg("a", 3)], 10);
    expect(timers.map((t) => [t.ms, t.cleared])).toEqual([
      [30_000, true],
      [10_000, false],
    ]);
    timers[1]!.fn();
    await q.idle();
    expect(ran).toEqual([3]);
    expect(q.stats().delayed).toBe(0);
  });

  it("a throwing pass is reported and does not wedge its key", async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const q = new WorkQueue({
      concurrency: 1,
      handle: async () => {
        calls++;
        if (calls === 1) throw new Error("boom");
      },
      onError: (e) => errors.push(e),
    });
    await q.send([msg("a")]);
    await q.idle();
    await q.send([msg("a")]);
    await q.idle();
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });
});

describe("WorkQueue: one message a key (coalesce)", () => {
  it("the same slot's job of the next sweep replaces the waiting one; another slot's runs beside it", async () => {
    const g = gate();
    const seen: Message[] = [];
    const job = (slot: string, due: number): JobMessage => ({
      kind: "job",
      job: { controller: "proxy", task: "probe", slot, objects: [], due },
    });
    const q = new WorkQueue({
      concurrency: 1,
      shardConcurrency: 1,
      handle: async (m) => {
        seen.push(m);
        await g.opened;
      },
    });
    await q.send([job("blocker", 0)]);
    await q.send([job("30-0", 1)]);
    await q.send([job("30-0", 2), job("45-0", 2)]);
    expect(q.stats()).toEqual({ ready: 2, running: 1, delayed: 0 });
    g.open();
    await q.idle();
    expect(seen.map((m) => (m.kind === "job" ? `${m.job.slot}@${m.job.due}` : "pass"))).toEqual([
      "blocker@0",
      "30-0@2",
      "45-0@2",
    ]);
  });

  it("a delayed stale follow-up and a later event for the recreated object: the pass runs without a UID", async () => {
    const seen: Message[] = [];
    let fire: () => void = () => undefined;
    const q = new WorkQueue({
      concurrency: 1,
      handle: async (m) => {
        seen.push(m);
      },
      setTimer: (fn) => {
        fire = fn;
        return 1;
      },
      clearTimer: () => undefined,
    });
    await q.send([{ ...msg("a", 1), uid: "old" }], 5);
    await q.send([{ ...msg("a"), uid: "new" }], 10);
    fire();
    await q.idle();
    expect(seen).toEqual([msg("a", 1)]);
  });
});

describe("WorkQueue metrics (client-go's workqueue families, name = the controller)", () => {
  it("counts an add once per waiting key, times the wait and the work, and reports the depth", async () => {
    const metrics = new PrometheusMetrics();
    let now = 1_000;
    const g = gate();
    const q = new WorkQueue({
      concurrency: 1,
      metrics,
      now: () => now,
      handle: async (m) => {
        if (nameOf(m) === "a") await g.opened;
        now += 250;
      },
    });
    await q.send([msg("a")]); // starts at once: waited 0 s
    now += 2_000;
    await q.send([msg("b"), msg("b", 1)]); // waits behind a; the second joins the first
    await q.send([{ request: { controller: "other", name: "x" }, attempt: 0 }]);
    expect(q.depthByName()).toEqual(
      new Map([
        ["c", 1],
        ["other", 1],
      ]),
    );
    g.open();
    await q.idle();
    expect(q.depthByName()).toEqual(
      new Map([
        ["c", 0],
        ["other", 0],
      ]),
    );
    expect(metrics.value("workqueue_adds_total", { name: "c" })).toBe(2);
    expect(metrics.value("workqueue_adds_total", { name: "other" })).toBe(1);
    const text = metrics.render();
    // a waited 0 s and ran 2.25 s (held, then 250 ms); b waited from its send until a ended: 0.25 s.
    expect(text).toContain('workqueue_queue_duration_seconds_bucket{name="c",le="0.1"} 1');
    expect(text).toContain('workqueue_queue_duration_seconds_bucket{name="c",le="1"} 2');
    expect(text).toContain('workqueue_queue_duration_seconds_sum{name="c"} 0.25');
    expect(text).toContain('workqueue_work_duration_seconds_count{name="c"} 2');
    expect(text).toContain('workqueue_work_duration_seconds_sum{name="c"} 2.5');
  });
});
