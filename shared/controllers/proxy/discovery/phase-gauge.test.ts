import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../../test/support/fake-kube.ts";
import { testProxy } from "../../../../test/support/proxies.ts";
import { runSweepTask } from "../../../runtime/sweep/index.ts";
import { countByPhase, proxyPhaseGaugeTask } from "./phase-gauge.ts";

const zero = { Pending: 0, Provisioning: 0, Ready: 0, Unhealthy: 0, Deleting: 0, Failed: 0, Unknown: 0 };

describe("countByPhase", () => {
  it.each([
    ["nothing", [], zero],
    [
      "two Ready, one Unhealthy",
      [testProxy({ name: "a" }), testProxy({ name: "b" }), testProxy({ name: "c", phase: "Unhealthy" })],
      { ...zero, Ready: 2, Unhealthy: 1 },
    ],
    [
      "no status yet",
      [{ apiVersion: "crawl.kubefn.dev/v1alpha1", kind: "Proxy", metadata: { name: "n" } }],
      { ...zero, Unknown: 1 },
    ],
  ])("%s", (_, primaries, expected) => {
    expect(countByPhase(primaries)).toEqual(expected);
  });
});

describe("proxyPhaseGaugeTask", () => {
  it("sets kubefn_proxies{phase} for every phase, zeros included", async () => {
    const { ctx } = fakeContext(new FakeKube());
    const gauges: [string, number, Record<string, string> | undefined][] = [];
    ctx.metrics.gauge = (name, value, labels) => gauges.push([name, value, labels]);
    const task = proxyPhaseGaugeTask();
    expect(task.controller).toBe("proxy");
    await runSweepTask(task, ctx, [[testProxy({ name: "a" })], [testProxy({ name: "b" })]]);
    expect(gauges).toContainEqual(["kubefn_proxies", 2, { phase: "Ready" }]);
    expect(gauges).toContainEqual(["kubefn_proxies", 0, { phase: "Failed" }]);
    expect(gauges).toHaveLength(7);
  });
});
