import { describe, expect, it } from "vitest";
import { eventName, formatMicroTime } from "./events.ts";
import type { KubeObject } from "./port.ts";

const proxy: KubeObject = {
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace: "default", name: "px", uid: "u-1" },
};
const ev = { type: "Warning" as const, reason: "ProbeFailed", action: "Reconcile", note: "Healthy=False" };

describe("eventName", () => {
  it("is the same for the same event, so repeats aggregate into one series", () => {
    expect(eventName(proxy, ev, "kubefn.dev/proxy", "kubefn")).toBe(
      eventName(proxy, { ...ev }, "kubefn.dev/proxy", "kubefn"),
    );
    expect(eventName(proxy, ev, "kubefn.dev/proxy", "kubefn")).toMatch(/^px\.[0-9a-f]{16}$/);
  });
  it.each([
    ["reason", { ...ev, reason: "ProbeSucceeded" }],
    ["note (immutable on the API server)", { ...ev, note: "Healthy=False: other" }],
    ["type", { ...ev, type: "Normal" as const }],
    ["action", { ...ev, action: "CreateInstance" }],
  ])("differs when the %s differs", (_field, other) => {
    expect(eventName(proxy, other, "kubefn.dev/proxy", "kubefn")).not.toBe(
      eventName(proxy, ev, "kubefn.dev/proxy", "kubefn"),
    );
  });
  it("differs for a recreated object (new UID)", () => {
    const again = { ...proxy, metadata: { ...proxy.metadata, uid: "u-2" } };
    expect(eventName(again, ev, "c", "i")).not.toBe(eventName(proxy, ev, "c", "i"));
  });
  it("stays a valid name for a 253-character object name", () => {
    const long = { ...proxy, metadata: { ...proxy.metadata, name: "a".repeat(253) } };
    expect(eventName(long, ev, "c", "i").length).toBeLessThanOrEqual(253);
  });
});

describe("formatMicroTime", () => {
  it("writes six fractional digits, as metav1.MicroTime", () => {
    expect(formatMicroTime(new Date("2026-11-30T18:00:01.234Z"))).toBe("2026-11-30T18:00:01.234000Z");
  });
});
