import { describe, expect, it } from "vitest";
import type { RelayEvent } from "../../shared/runtime/index.ts";
import { CoalescingBuffer, coalesce, eventKey } from "./buffer.ts";

const cm = { group: "", version: "v1", resource: "configmaps" };
const ev = (
  type: RelayEvent["type"],
  name: string,
  uid = "u1",
  extra: Record<string, unknown> = {},
): RelayEvent => ({
  type,
  resource: cm,
  object: { metadata: { name, namespace: "ns", uid }, ...extra },
});

describe("eventKey", () => {
  it("separates resource, namespace and name", () => {
    expect(eventKey(ev("ADDED", "a"))).toBe("/configmaps/ns/a");
    const proxy: RelayEvent = {
      type: "ADDED",
      resource: { group: "crawl.kubefn.dev", version: "v1", resource: "proxies" },
      object: { metadata: { name: "a", namespace: "ns" } },
    };
    expect(eventKey(proxy)).not.toBe(eventKey(ev("ADDED", "a")));
  });
});

describe("coalesce", () => {
  it.each<[string, RelayEvent, RelayEvent, RelayEvent["type"], string]>([
    [
      "MODIFIED then MODIFIED → the later",
      ev("MODIFIED", "a", "u1", { v: 1 }),
      ev("MODIFIED", "a", "u1", { v: 2 }),
      "MODIFIED",
      "u1",
    ],
    [
      "ADDED then MODIFIED → ADDED with the later body",
      ev("ADDED", "a"),
      ev("MODIFIED", "a", "u1", { v: 2 }),
      "ADDED",
      "u1",
    ],
    ["MODIFIED then DELETED → DELETED", ev("MODIFIED", "a"), ev("DELETED", "a"), "DELETED", "u1"],
    [
      "DELETED then stale MODIFIED (same uid) → DELETED wins",
      ev("DELETED", "a"),
      ev("MODIFIED", "a"),
      "DELETED",
      "u1",
    ],
    [
      "DELETED then ADDED of a new object (other uid) → ADDED",
      ev("DELETED", "a"),
      ev("ADDED", "a", "u2"),
      "ADDED",
      "u2",
    ],
  ])("%s", (_name, earlier, later, type, uid) => {
    const merged = coalesce(earlier, later);
    expect(merged.type).toBe(type);
    expect(merged.object.metadata.uid).toBe(uid);
  });

  it.each<[string, boolean, boolean, boolean]>([
    ["readiness then readiness → readiness alone (a look)", true, true, true],
    ["readiness then a spec change → a whole pass", true, false, false],
    ["a spec change then readiness → a whole pass", false, true, false],
  ])("issue 33: %s", (_name, first, second, readinessOnly) => {
    const mark = (e: RelayEvent, on: boolean): RelayEvent => (on ? { ...e, readinessOnly: true } : e);
    const merged = coalesce(mark(ev("MODIFIED", "a"), first), mark(ev("MODIFIED", "a"), second));
    expect(merged.readinessOnly === true).toBe(readinessOnly);
  });

  it("issue 33: a created object's readiness change is still its creation (a whole pass)", () => {
    const merged = coalesce(ev("ADDED", "a"), { ...ev("MODIFIED", "a"), readinessOnly: true });
    expect(merged.type).toBe("ADDED");
    expect(merged.readinessOnly).toBeUndefined();
  });

  it("keeps the later body", () => {
    expect(coalesce(ev("ADDED", "a"), ev("MODIFIED", "a", "u1", { v: 2 })).object.v).toBe(2);
  });
});

describe("CoalescingBuffer", () => {
  it("holds one event per key, in first-arrival order", () => {
    const buffer = new CoalescingBuffer(10);
    buffer.put(ev("ADDED", "a"));
    buffer.put(ev("ADDED", "b"));
    for (let v = 0; v < 100; v++) buffer.put(ev("MODIFIED", "a", "u1", { v }));
    expect(buffer.size).toBe(2);
    const taken = buffer.take(10);
    expect(taken.map((e) => [e.object.metadata.name, e.type, e.object.v])).toEqual([
      ["a", "ADDED", 99],
      ["b", "ADDED", undefined],
    ]);
    expect(buffer.size).toBe(0);
  });

  it("takes at most max, oldest first, leaving the rest", () => {
    const buffer = new CoalescingBuffer(10);
    for (const name of ["a", "b", "c"]) buffer.put(ev("ADDED", name));
    expect(buffer.take(2).map((e) => e.object.metadata.name)).toEqual(["a", "b"]);
    expect(buffer.take(2).map((e) => e.object.metadata.name)).toEqual(["c"]);
  });

  it("when full, a new key drops the oldest pending event and reports it", () => {
    const dropped: string[] = [];
    const buffer = new CoalescingBuffer(3, (e) => dropped.push(e.object.metadata.name));
    for (const name of ["a", "b", "c", "d", "e"]) buffer.put(ev("ADDED", name));
    expect(buffer.size).toBe(3);
    expect(dropped).toEqual(["a", "b"]);
    expect(buffer.take(10).map((e) => e.object.metadata.name)).toEqual(["c", "d", "e"]);
  });

  it("when full, an update of a pending key drops nothing", () => {
    const dropped: string[] = [];
    const buffer = new CoalescingBuffer(2, (e) => dropped.push(e.object.metadata.name));
    buffer.put(ev("ADDED", "a"));
    buffer.put(ev("ADDED", "b"));
    buffer.put(ev("DELETED", "a"));
    expect(dropped).toEqual([]);
    expect(buffer.take(10).map((e) => e.type)).toEqual(["DELETED", "ADDED"]);
  });

  it("rejects a capacity below 1", () => {
    expect(() => new CoalescingBuffer(0)).toThrow(RangeError);
  });
});
