import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import type { Prober } from "../../health/index.ts";
import type { KubeObject } from "../../kube/port.ts";
import { proxyResource } from "./api.ts";
import { proxyHealthTask } from "./health-task.ts";

const now = new Date("2026-11-30T12:00:00Z");

function externalProxy(name: string, status: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "crawl", name, uid: `uid-${name}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128 },
      healthCheck: { probeURL: "http://example.com/", successThreshold: 2, failureThreshold: 3 },
    },
    status,
  };
}

describe("proxy health task", () => {
  it("per-Proxy probe recency is a metric: every probe sets it, even one that changes no status", async () => {
    const kube = new FakeKube();
    const proxies = [externalProxy("a"), externalProxy("b")];
    for (const p of proxies) kube.seed(proxyResource, p);
    const { ctx } = fakeContext(kube, { now });
    const gauges: { name: string; value: number; labels?: Record<string, string> }[] = [];
    ctx.metrics = {
      ...ctx.metrics,
      gauge: (name, value, labels) => gauges.push({ name, value, ...(labels ? { labels } : {}) }),
    };
    const prober: Prober = {
      probe: async (t) => ({ ok: t.proxy.host === "203.0.113.7", latencyMs: 12 }),
    };
    const task = proxyHealthTask({ prober, concurrency: 2, sweepPeriodSeconds: 60 });
    // First probe: one success, below successThreshold 2 — no verdict, no report, no status change.
    const counts = await task.run(ctx, proxies);
    expect(counts).toMatchObject({ probed: 2, reports: 0 });
    const at = now.getTime() / 1000;
    expect(gauges).toEqual(
      expect.arrayContaining([
        {
          name: "kubefn_proxy_last_probe_timestamp_seconds",
          value: at,
          labels: { namespace: "crawl", name: "a" },
        },
        {
          name: "kubefn_proxy_last_probe_timestamp_seconds",
          value: at,
          labels: { namespace: "crawl", name: "b" },
        },
        { name: "kubefn_proxy_probe_success", value: 1, labels: { namespace: "crawl", name: "a" } },
      ]),
    );
  });

  it("a Proxy that is not probed (no healthCheck) gets no recency series", async () => {
    const kube = new FakeKube();
    const bare = externalProxy("bare");
    (bare.spec as Record<string, unknown>).healthCheck = undefined;
    kube.seed(proxyResource, bare);
    const { ctx } = fakeContext(kube, { now });
    const gauges: string[] = [];
    ctx.metrics = { ...ctx.metrics, gauge: (name) => gauges.push(name) };
    const prober: Prober = { probe: async () => ({ ok: true, latencyMs: 1 }) };
    await proxyHealthTask({ prober, concurrency: 1, sweepPeriodSeconds: 60 }).run(ctx, [bare]);
    expect(gauges).toEqual([]);
  });
});
