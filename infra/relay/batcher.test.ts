import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { RelayEvent } from "../../shared/runtime/index.ts";
import { Batcher, type BatchRules, flushDelay } from "./batcher.ts";
import { CoalescingBuffer } from "./buffer.ts";

const rules: BatchRules = { maxEvents: 3, maxDelayMs: 1000 };

describe("flushDelay", () => {
  it.each<[string, number, number, number, number | undefined]>([
    ["empty buffer: nothing to do", 0, 0, 500, undefined],
    ["one event, just arrived: wait the interval", 1, 1000, 1000, 1000],
    ["one event, waited 400 ms: 600 ms left", 1, 1000, 1400, 600],
    ["interval elapsed: now", 2, 1000, 2000, 0],
    ["overdue: now, never negative", 2, 1000, 9000, 0],
    ["full batch: now", 3, 1000, 1000, 0],
    ["more than a batch: now", 50, 1000, 1000, 0],
  ])("%s", (_name, size, since, now, expected) => {
    expect(flushDelay(size, since, now, rules)).toBe(expected);
  });
});

const ev = (name: string): RelayEvent => ({
  type: "ADDED",
  resource: { group: "", version: "v1", resource: "configmaps" },
  object: { metadata: { name, namespace: "ns" } },
});

describe("Batcher", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup(deliver: (events: RelayEvent[]) => Promise<void> = async () => {}) {
    const buffer = new CoalescingBuffer(100);
    const batches: string[][] = [];
    const batcher = new Batcher(buffer, rules, async (events) => {
      batches.push(events.map((e) => e.object.metadata.name));
      await deliver(events);
    });
    const put = (name: string) => {
      buffer.put(ev(name));
      batcher.notify();
    };
    return { buffer, batcher, batches, put };
  }

  it("flushes at once when maxEvents are pending", () => {
    const { batches, put } = setup();
    put("a");
    put("b");
    expect(batches).toEqual([]);
    put("c");
    expect(batches).toEqual([["a", "b", "c"]]);
  });

  it("flushes a partial batch maxDelayMs after its first event", async () => {
    const { batches, put } = setup();
    put("a");
    await vi.advanceTimersByTimeAsync(600);
    put("b");
    await vi.advanceTimersByTimeAsync(399);
    expect(batches).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([["a", "b"]]);
  });

  it("sends one batch at a time; events arriving meanwhile coalesce and go next", async () => {
    let release!: () => void;
    const { batches, put, buffer, batcher } = setup((events) =>
      events[0]?.object.metadata.name === "a" ? new Promise<void>((r) => (release = r)) : Promise.resolve(),
    );
    put("a");
    put("b");
    put("c");
    expect(batches).toEqual([["a", "b", "c"]]);
    put("d");
    put("d");
    put("e");
    put("f");
    put("g");
    expect(batches.length).toBe(1);
    expect(buffer.size).toBe(4);
    release();
    await batcher.idle();
    await vi.advanceTimersByTimeAsync(0);
    // The backlog was already waiting: a full batch goes at once, the remainder after the interval.
    expect(batches).toEqual([
      ["a", "b", "c"],
      ["d", "e", "f"],
    ]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(batches[2]).toEqual(["g"]);
  });

  it("stop() cancels the pending timer", async () => {
    const { batches, put, batcher } = setup();
    put("a");
    await batcher.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(batches).toEqual([]);
  });
});
