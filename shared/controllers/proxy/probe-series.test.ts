/**
 * A Proxy's probe series (`kubefn_proxy_last_probe_timestamp_seconds`, `kubefn_proxy_probe_success`,
 * labelled namespace and name) go with the Proxy on the Node host: at its absent pass, or at the
 * end of the first sweep that no longer lists it.
 */
import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { PrometheusMetrics } from "../../app/telemetry/index.ts";
import type { Prober } from "../../health/index.ts";
import type { KubeObject } from "../../kube/port.ts";
import { createRegistry, runPass } from "../../runtime/index.ts";
import { runSweepTask } from "../../runtime/sweep/index.ts";
import { proxyResource } from "./api.ts";
import { proxyController } from "./controller.ts";
import { proxyHealthTask } from "./health-task.ts";

const now = new Date("2026-11-30T12:00:00Z");

function externalProxy(name: string): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace: "crawl", name, uid: `uid-${name}`, resourceVersion: "1" },
    spec: {
      mode: "External",
      endpoint: { host: "203.0.113.7", port: 3128 },
      healthCheck: { probeURL: "http://example.com/", successThreshold: 2, failureThreshold: 3 },
    },
    status: {},
  };
}

const prober: Prober = { probe: async () => ({ ok: true, latencyMs: 12 }) };
const seriesOf = (m: PrometheusMetrics) =>
  [...m.render().matchAll(/^(kubefn_proxy_[a-z_]+)\{name="([^"]+)",namespace="crawl"\}/gm)].map(
    (x) => `${x[1]} ${x[2]}`,
  );

describe("a Proxy's probe series", () => {
  async function probed(names: string[]) {
    const kube = new FakeKube();
    const proxies = names.map(externalProxy);
    for (const p of proxies) kube.seed(proxyResource, p);
    const metrics = new PrometheusMetrics();
    const { ctx } = fakeContext(kube, { now });
    ctx.metrics = metrics;
    const task = proxyHealthTask({ prober, concurrency: 2, sweepPeriodSeconds: 60, confirmDelayMs: 0 });
    await runSweepTask(task, ctx, [proxies]);
    return { kube, ctx, metrics, task, proxies };
  }

  it("a sweep that no longer lists a Proxy drops its series, and keeps the listed ones'", async () => {
    const { ctx, metrics, task, proxies } = await probed(["a", "b"]);
    expect(seriesOf(metrics).sort()).toEqual([
      "kubefn_proxy_last_probe_timestamp_seconds a",
      "kubefn_proxy_last_probe_timestamp_seconds b",
      "kubefn_proxy_probe_success a",
      "kubefn_proxy_probe_success b",
    ]);
    await runSweepTask(task, ctx, [[proxies[0]!]]);
    expect(seriesOf(metrics).sort()).toEqual([
      "kubefn_proxy_last_probe_timestamp_seconds a",
      "kubefn_proxy_probe_success a",
    ]);
  });

  it("a sweep keeps a probe series that names no Proxy (where a host keeps only the latest of any)", async () => {
    const { ctx, metrics, task, proxies } = await probed(["a"]);
    metrics.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_796_000_000);
    await runSweepTask(task, ctx, [[proxies[0]!]]);
    expect(metrics.render()).toMatch(/^kubefn_proxy_last_probe_timestamp_seconds \d/m);
  });

  it("the same with probes fanned out as shards: the sweep that plans them drops the unlisted", async () => {
    const { ctx, metrics, proxies } = await probed(["a", "b"]);
    const fanned = proxyHealthTask({
      prober,
      concurrency: 2,
      sweepPeriodSeconds: 60,
      fanOut: { shardSize: 10 },
    });
    await runSweepTask(fanned, ctx, [[proxies[1]!]]);
    expect(seriesOf(metrics).sort()).toEqual([
      "kubefn_proxy_last_probe_timestamp_seconds b",
      "kubefn_proxy_probe_success b",
    ]);
  });

  it("the pass that finds a Proxy gone drops its series, and only its", async () => {
    const { kube, ctx, metrics } = await probed(["a", "b"]);
    await kube.delete(proxyResource, { namespace: "crawl", name: "a" });
    const registry = createRegistry([proxyController({ providers: {} })]);
    const result = await runPass(ctx, registry, {
      request: { controller: "proxy", namespace: "crawl", name: "a" },
      attempt: 0,
    });
    expect(result).toMatchObject({ absent: true, result: "done" });
    expect(seriesOf(metrics).sort()).toEqual([
      "kubefn_proxy_last_probe_timestamp_seconds b",
      "kubefn_proxy_probe_success b",
    ]);
  });
});
