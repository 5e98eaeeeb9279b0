import { describe, expect, it } from "vitest";
import type { ProxyStatus } from "./api.ts";
import { applyHealth } from "./status.ts";

describe("applyHealth", () => {
  it("regression: projecting a report onto the status the API server returns keeps its keys in place (drift:health every sweep)", () => {
    // The API server returns a status's fields sorted by name; the drift compares the projection
    // with it, so a field deleted and added again (moved to the end) read as a change each sweep.
    const status = {
      conditions: [
        {
          type: "Healthy",
          status: "True",
          reason: "ProbeSucceeded",
          message: "probes through the proxy succeed",
          lastTransitionTime: "1970-01-01T00:00:00Z",
          observedGeneration: 1,
        },
      ],
      lastHealthCheckTime: "2026-12-03T20:00:00Z",
      latencyMillis: 12,
      latencySamples: 3,
      phase: "Ready",
    } as ProxyStatus;
    const projected = structuredClone(status);
    // As projectHealth makes it: the stored report spread in, its sample count with it.
    const report = {
      kind: "Reported" as const,
      healthy: true,
      latencyMs: 12,
      samples: 3,
      at: "2026-12-03T20:00:00Z",
    };
    applyHealth(projected, report, true, { now: new Date(0), generation: 1 });
    expect(JSON.stringify(projected)).toBe(JSON.stringify(status));
  });

  it("removes latencySamples when the report does not say how many probes its latency is the median of", () => {
    const status = { latencyMillis: 12, latencySamples: 3 } as ProxyStatus;
    applyHealth(status, { kind: "Reported", healthy: true, latencyMs: 12 }, true, {
      now: new Date(0),
      generation: 1,
    });
    expect(status.latencySamples).toBeUndefined();
    expect(status.latencyMillis).toBe(12);
  });
});
