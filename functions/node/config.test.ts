import { describe, expect, it } from "vitest";
import { parseNodeHostEnv } from "./config.ts";

describe("Node host settings", () => {
  it("runs 3 passes at once by default: the seed's MaxConcurrentReconciles", () => {
    expect(parseNodeHostEnv({}).settings.passConcurrency).toBe(3);
    expect(parseNodeHostEnv({ KUBEFN_CONCURRENCY: "8" }).settings.passConcurrency).toBe(8);
  });
});
