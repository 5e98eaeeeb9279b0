import { describe, expect, it } from "vitest";
import { parseNodeHostEnv } from "./config.ts";

describe("Node host settings", () => {
  it("runs 3 passes at once by default: the seed's MaxConcurrentReconciles", () => {
    expect(parseNodeHostEnv({}).settings.passConcurrency).toBe(3);
    expect(parseNodeHostEnv({ KUBEFN_CONCURRENCY: "8" }).settings.passConcurrency).toBe(8);
  });

  it("fans probes out as delayed shards by default, so a 30 s Proxy is probed every 30 s", () => {
    expect(parseNodeHostEnv({}).settings.probeShardSize).toBe(40);
    expect(parseNodeHostEnv({ KUBEFN_PROBE_SHARD_SIZE: "0" }).settings.probeShardSize).toBeUndefined();
  });
});
