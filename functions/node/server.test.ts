/**
 * The Node host's HTTP server under a slow-loris: many connections sending their headers a little
 * at a time, and many with well-formed but forged relay signature headers whose bodies dribble.
 * The intake runs behind the host's own `listen` (real sockets, Node's http server): other
 * requests are still served, and every slow connection is cut off at the request deadline
 * (headers and body together), not held.
 */
import { connect, type Socket } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { PrometheusMetrics } from "../../shared/app/index.ts";
import { createIntakeApp, mapWithRegistry } from "../../shared/app/intake/index.ts";
import { signBatch } from "../../shared/auth/index.ts";
import { proxyProbeSeries } from "../../shared/controllers/proxy/probe-series.ts";
import { createRegistry, type Message } from "../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { RELAY_SECRET } from "../../test/support/intake-app.ts";
import { proxyController } from "../../test/unit/runtime/controllers.ts";
import { parseNodeHostEnv } from "./config.ts";
import { withoutObjectSeries } from "./object-series.ts";
import { type HostParts, hostApp, listen, metricsApp } from "./server.ts";

const relayBody = JSON.stringify({
  kind: "RelayBatch",
  apiVersion: "kubefn.dev/v1",
  events: [
    {
      type: "MODIFIED",
      resource: { group: "crawl.example.com", version: "v1alpha1", resource: "proxies" },
      object: { metadata: { name: "p1", namespace: "ns1", uid: "u1", generation: 2 } },
    },
  ],
});

/** A connection that sent `first` and then a byte now and then, until the server closes it. */
function slowConnection(url: URL, first: string): { socket: Socket; closed: Promise<void> } {
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => {});
  socket.on("data", () => {});
  socket.write(first);
  const drip = setInterval(() => socket.write(" "), 100);
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  void closed.then(() => clearInterval(drip));
  return { socket, closed };
}

describe("the Node host's intake under a slow-loris (issue 30, Low)", () => {
  it("slow headers and forged relay headers with dribbling bodies: the relay's batch is still served, and each slow connection is cut off at the request deadline", async () => {
    const nowSeconds = Math.floor(Date.now() / 1000);
    const { ctx } = fakeContext(new FakeKube());
    const enqueued: Message[] = [];
    const app = createIntakeApp({
      relaySecret: RELAY_SECRET,
      maxBodyBytes: 1 << 20,
      replayWindowSeconds: 300,
      // The default bounds (16 slots, a 30 s body deadline): only the server's deadline is short.
      clock: { now: () => new Date() },
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, createRegistry([proxyController()]), []),
      enqueue: async (m) => {
        enqueued.push(...m);
      },
    });
    const server = await listen(app.fetch, 0, "127.0.0.1", undefined, { requestTimeoutMs: 1500 });
    onTestFinished(() => server.close());
    const url = new URL(server.url);
    const slow: ReturnType<typeof slowConnection>[] = [];
    onTestFinished(() => {
      for (const s of slow) s.socket.destroy();
    });
    // More than the intake's 16 slots of each kind.
    for (let i = 0; i < 20; i++) {
      slow.push(slowConnection(url, `POST /v1/events HTTP/1.1\r\nHost: ${url.host}\r\nX-Slow-${i}:`));
      slow.push(
        slowConnection(
          url,
          `POST /v1/events HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
            `Content-Length: 100000\r\nX-Kubefn-Signature: sha256=${"ab".repeat(32)}\r\n` +
            `X-Kubefn-Timestamp: ${nowSeconds}\r\n\r\n{`,
        ),
      );
    }
    await new Promise((r) => setTimeout(r, 300));

    const headers = await signBatch(RELAY_SECRET, relayBody, nowSeconds);
    const real = await fetch(`${server.url}/v1/events`, { method: "POST", body: relayBody, headers });
    expect(real.status).toBe(202);
    expect(enqueued.map((m) => (m.kind === "job" ? m.job.slot : m.request.name))).toEqual(["p1"]);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);

    // None holds on: the server closes every one, though each keeps sending.
    await Promise.all(slow.map((s) => s.closed));
  });
});

describe("the Node host's /metrics (issue 30, Low)", () => {
  /** The series lines of a Prometheus text body. */
  const seriesOf = (body: string) => body.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
  /** What the health task sets for `n` Proxies' probes, on the metrics the host gives it. */
  function probe(metrics: PrometheusMetrics, n: number, perProxy: boolean) {
    const given = perProxy ? metrics : withoutObjectSeries(metrics);
    for (let i = 0; i < n; i++) {
      const proxy = { namespace: `tenant-${i % 7}`, name: `p${i}` };
      given.gauge("kubefn_proxy_last_probe_timestamp_seconds", 1_700_000_000 + i, proxy);
      given.gauge("kubefn_proxy_probe_success", i % 2, proxy);
    }
  }

  it("a tenant's 10,000 Proxies add no series by default: as many as one Proxy's", () => {
    expect(parseNodeHostEnv({}).metricsPerObject).toBe(false);
    const one = new PrometheusMetrics();
    probe(one, 1, false);
    const many = new PrometheusMetrics();
    probe(many, 10_000, false);
    expect(seriesOf(many.render())).toHaveLength(seriesOf(one.render()).length);
    // The last probe's time stays, the latest of any Proxy: the KubefnProbesStale alert reads it.
    expect(seriesOf(many.render())).toEqual([
      `kubefn_proxy_last_probe_timestamp_seconds ${1_700_000_000 + 9_999}`,
    ]);
    for (const name of proxyProbeSeries) expect(many.render()).not.toContain(`${name}{`);
  });

  it("KUBEFN_METRICS_PER_OBJECT=true keeps a series per Proxy", () => {
    expect(parseNodeHostEnv({ KUBEFN_METRICS_PER_OBJECT: "true" }).metricsPerObject).toBe(true);
    const metrics = new PrometheusMetrics();
    probe(metrics, 100, true);
    expect(seriesOf(metrics.render())).toHaveLength(200);
  });

  it("with KUBEFN_METRICS_PORT, /metrics is served on that listener alone, not beside intake and the crawler API", async () => {
    expect(parseNodeHostEnv({ KUBEFN_METRICS_PORT: "9090" }).metricsPort).toBe(9090);
    const metrics = new PrometheusMetrics();
    metrics.count("kubefn_passes_total", { controller: "proxy", result: "done" });
    const parts = {
      kubefn: { fetch: async () => new Response("no such route", { status: 404 }) },
      queue: { stats: () => ({ ready: 0, running: 0, delayed: 0 }), depthByName: () => new Map() },
      guard: { stats: () => ({ state: "closed", opened: 0, heldBack: 0, overBudget: 0, retried: 0 }) },
    } as unknown as HostParts;
    const main = await listen(
      hostApp(metrics, () => parts, undefined, { metrics: false }).fetch,
      0,
      "127.0.0.1",
    );
    onTestFinished(() => main.close());
    const scrape = await listen(metricsApp(metrics, () => parts).fetch, 0, "127.0.0.1");
    onTestFinished(() => scrape.close());
    expect((await fetch(`${main.url}/metrics`)).status).toBe(404);
    const scraped = await fetch(`${scrape.url}/metrics`);
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('kubefn_passes_total{controller="proxy",result="done"} 1');
    expect((await fetch(`${scrape.url}/v1/proxies`)).status).toBe(404);
  });
});
