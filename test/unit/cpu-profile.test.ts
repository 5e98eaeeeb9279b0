import { describe, expect, it } from "vitest";
import { type CpuProfile, profileBreakdown } from "../bench/cpu-profile.ts";

const frame = (functionName: string, url = "worker.js") => ({ functionName, url, lineNumber: 0 });

/**
 * (root) ─┬─ (idle)                                   4
 *         ├─ (program)                                5
 *         ├─ "" (no script: the runtime calling in)    6
 *         └─ queue ── probe ─┬─ readUntil              7
 *                            └─ "" (a built-in)        8
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame("(root)", ""), children: [4, 5, 6, 2] },
    { id: 2, callFrame: frame("queue"), children: [3] },
    { id: 3, callFrame: frame("probe"), children: [7, 8] },
    { id: 4, callFrame: frame("(idle)", "") },
    { id: 5, callFrame: frame("(program)", "") },
    { id: 6, callFrame: frame("", "") },
    { id: 7, callFrame: frame("readUntil") },
    { id: 8, callFrame: frame("", "") },
  ],
  startTime: 0,
  endTime: 10_000,
  // Each sample's time is the interval to the next: 1 ms each, the last one none.
  // The last sample is the idle one: no interval follows it.
  samples: [4, 5, 6, 7, 7, 8, 2, 4],
  timeDeltas: [0, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
};

describe("profileBreakdown", () => {
  it.each([
    {
      name: "innermost rule wins; a built-in goes to its caller's rule; idle is not busy",
      rules: [
        { phase: "socket", functions: /^readUntil$/ },
        { phase: "prober", functions: /^probe$/ },
        { phase: "program", functions: /^\(program\)$/ },
        { phase: "runtime", functions: /^\(native\)$/ },
      ],
      phases: { socket: 2, prober: 1, program: 1, runtime: 1, "other JS": 1 },
    },
    {
      name: "without rules everything busy is other JS",
      rules: [],
      phases: { "other JS": 6 },
    },
  ])("$name", ({ rules, phases }) => {
    const b = profileBreakdown(profile, rules);
    expect(b.spanMs).toBe(10);
    expect(b.busyMs).toBe(6);
    expect(b.busySamples).toBe(6);
    expect(Object.fromEntries(b.phases.map((p) => [p.phase, p.ms]))).toEqual(phases);
    expect(Object.fromEntries(b.phases.map((p) => [p.phase, p.samples]))).toEqual(phases);
  });
});
