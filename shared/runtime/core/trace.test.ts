import { describe, expect, it } from "vitest";
import { traceFrom } from "./trace.ts";

const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

describe("traceFrom", () => {
  it("continues a well-formed parent: same trace id, a new span whose parent is the sender's", () => {
    const t = traceFrom(parent);
    expect(t.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(t.parentSpanId).toBe("b7ad6b7169203331");
    expect(t.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(t.spanId).not.toBe("b7ad6b7169203331");
    expect(t.traceparent).toBe(`00-${t.traceId}-${t.spanId}-01`);
  });

  it.each([
    ["no parent", undefined],
    ["a malformed parent", "00-xyz-b7ad6b7169203331-01"],
    ["an all-zero trace id", "00-00000000000000000000000000000000-b7ad6b7169203331-01"],
    ["an all-zero span id", "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"],
    ["a parent of another version", "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
  ])("starts a new trace for %s", (_what, given) => {
    const t = traceFrom(given);
    expect(t.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(t.traceId).not.toBe("0af7651916cd43dd8448eb211c80319c");
    expect(t.parentSpanId).toBeUndefined();
  });
});
