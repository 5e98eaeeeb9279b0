import { getHeapSnapshot } from "node:v8";
import { describe, expect, it } from "vitest";
import {
  type HostMemoryStep,
  hostMemoryStepsFromEnv,
  hostMemoryVariantsFromEnv,
  parseHostMemoryVariant,
  report,
  summariseHeapSnapshot,
} from "../bench/host-memory.ts";

/** A class only this test makes, so its share of the snapshot is what the test put there. */
class HostMemoryBenchMarker {
  constructor(
    readonly a: number,
    readonly b: number,
    readonly c: number,
  ) {}
}

async function snapshotOfThisProcess(): Promise<Parameters<typeof summariseHeapSnapshot>[0]> {
  const chunks: Buffer[] = [];
  for await (const chunk of getHeapSnapshot()) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

describe("summariseHeapSnapshot", () => {
  it("sums a real snapshot by constructor: 100,000 objects of one class are counted under its name", async () => {
    const kept = Array.from({ length: 100_000 }, (_, i) => new HostMemoryBenchMarker(i, i, i));
    const summary = summariseHeapSnapshot(await snapshotOfThisProcess());
    // Each object has a map, properties and 3 in-object fields: at least 24 bytes each.
    expect(summary["object:HostMemoryBenchMarker"]).toBeGreaterThanOrEqual((100_000 * 24) / 2 ** 20 - 0.01);
    expect(summary["(strings)"]).toBeGreaterThan(0);
    expect(kept.length).toBe(100_000);
  }, 120_000);

  it("files strings, code and shapes under one name each, objects by type and name", () => {
    const snapshot = {
      snapshot: {
        meta: {
          node_fields: ["type", "name", "id", "self_size", "edge_count"],
          node_types: [["hidden", "array", "string", "object", "code", "closure", "concatenated string"]],
        },
      },
      strings: ["Proxy", "a", "ab", "(compiled)", "fn"],
      nodes: [
        ...[3, 0, 1, 2 ** 20, 0],
        ...[3, 0, 2, 2 ** 20, 0],
        ...[2, 1, 3, 2 ** 19, 0],
        ...[6, 2, 4, 2 ** 19, 0],
        ...[4, 3, 5, 2 ** 18, 0],
        ...[5, 4, 6, 2 ** 18, 0],
      ],
    };
    expect(summariseHeapSnapshot(snapshot)).toEqual({
      "object:Proxy": 2,
      "(strings)": 1,
      "(code)": 0.25,
      "closure:fn": 0.25,
    });
  });
});

describe("the host-memory bench's settings", () => {
  it.each([
    [undefined, [0, 1000, 3000]],
    ["1000,3000", [1000, 3000]],
    [" 0, 500 ", [0, 500]],
  ])("steps %j → %j", (raw, steps) => {
    expect(hostMemoryStepsFromEnv(raw === undefined ? {} : { KUBEFN_BENCH_HOST_MEMORY_STEPS: raw })).toEqual(
      steps,
    );
  });

  it.each(["3000,1000", "0,0", "1e3x", "-1,5"])("refuses steps %j", (raw) => {
    expect(() => hostMemoryStepsFromEnv({ KUBEFN_BENCH_HOST_MEMORY_STEPS: raw })).toThrow(/ascending/);
  });

  it("measures once with no extra options, or once per `|`-separated variant in order", () => {
    expect(hostMemoryVariantsFromEnv({})).toEqual([""]);
    expect(
      hostMemoryVariantsFromEnv({ KUBEFN_BENCH_HOST_MEMORY_NODE_OPTIONS: "|--max-old-space-size=256" }),
    ).toEqual(["", "--max-old-space-size=256"]);
  });

  it("runs a variant beginning with `image` as the image's process, with a Pod's old generation before its own options", () => {
    expect(parseHostMemoryVariant("")).toEqual({ image: false, nodeArgs: [] });
    expect(parseHostMemoryVariant("--max-semi-space-size=8 --max-old-space-size=256")).toEqual({
      image: false,
      nodeArgs: ["--max-semi-space-size=8", "--max-old-space-size=256"],
    });
    expect(parseHostMemoryVariant("image")).toEqual({ image: true, nodeArgs: ["--max-old-space-size=512"] });
    expect(parseHostMemoryVariant("image  --no-enable-source-maps")).toEqual({
      image: true,
      nodeArgs: ["--max-old-space-size=512", "--no-enable-source-maps"],
    });
  });
});

describe("report", () => {
  const step = (
    proxies: number,
    nodeOptions: string,
    rss: number,
    cpu: number,
    probes: number,
  ): HostMemoryStep => ({
    proxies,
    nodeOptions,
    rssMaxMiB: rss,
    rssMeanMiB: rss - 5,
    heapUsedMiB: 50,
    heapTotalMiB: 60,
    residentMiB: { malloc: 30, anonymous: rss - 84, binary: 54 },
    snapshotMiB: 70 + proxies / 1000,
    cpuMsPerMinute: cpu,
    systemMsPerMinute: cpu / 10,
    probesPerMinute: probes,
    loadAverage: [1, 1, 1],
    byConstructor: { "object:Object": 10 + proxies / 500, "(strings)": 5 },
  });

  it("gives each variant its own slopes: RSS and live heap per 1,000 Proxies, CPU of one more probe", () => {
    const { json, rows } = report([
      step(1000, "", 250, 1000, 2000),
      step(1000, "--x", 220, 1100, 2000),
      step(3000, "", 330, 2200, 6000),
      step(3000, "--x", 260, 2500, 6000),
    ]);
    expect(json.slopes).toEqual({
      "": {
        rssMiBPer1000Proxies: 40,
        liveHeapMiBPer1000Proxies: 1,
        marginalCpuMsPerProbe: 0.3,
        grewMost: { "object:Object": 4, "(strings)": 0 },
      },
      "--x": {
        rssMiBPer1000Proxies: 20,
        liveHeapMiBPer1000Proxies: 1,
        marginalCpuMsPerProbe: 0.35,
        grewMost: { "object:Object": 4, "(strings)": 0 },
      },
    });
    expect(rows.map((r) => r.name)).toContain("host-memory RSS per 1,000 Proxies (--x)");
  });

  it("has no slope for a variant measured at one size", () => {
    const { json } = report([step(1000, "", 250, 1000, 2000)]);
    expect(json.slopes).toMatchObject({ "": { rssMiBPer1000Proxies: null, marginalCpuMsPerProbe: null } });
  });
});
