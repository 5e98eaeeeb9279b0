/**
 * The fleet's intake: a batch is a cluster's by the credential it presented, never by what it
 * names. Each test's two kubefns are real (createKubefn, intake, mapping) over recording queues.
 */
import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { signBatch } from "../auth/index.ts";
import { createRegistry, done, type PassMessage } from "../runtime/index.ts";
import { clusterLog, clusterMetrics, fleetFetch } from "./clusters.ts";
import { createKubefn } from "./kubefn.ts";

const NOW = new Date("2026-11-30T12:00:00Z");
const credentials = {
  a: { auditToken: "audit-token-of-a-0123456789", relaySecret: "relay-secret-of-a-0123456789" },
  b: { auditToken: "audit-token-of-b-0123456789", relaySecret: "relay-secret-of-b-0123456789" },
};

/** A relay batch naming Proxy ns1/p1: cluster B's object, say. */
const batch = JSON.stringify({
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
const auditBatch = JSON.stringify({
  kind: "EventList",
  apiVersion: "audit.k8s.io/v1",
  items: [
    {
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      level: "Metadata",
      auditID: "a-1",
      stage: "ResponseComplete",
      verb: "update",
      user: { username: "alice" },
      objectRef: {
        resource: "proxies",
        namespace: "ns1",
        name: "p1",
        apiGroup: "crawl.example.com",
        apiVersion: "v1alpha1",
      },
      responseStatus: { code: 200 },
    },
  ],
});

function fleet(env: Record<string, string> = {}) {
  const member = (cluster: "a" | "b") => {
    const kube = new FakeKube();
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: "ns1", name: `proxy-of-${cluster}`, uid: `u-${cluster}` },
    });
    const { ctx } = fakeContext(kube, { now: NOW });
    const sent: PassMessage[] = [];
    const kubefn = createKubefn(
      parseWorkerEnv({
        KUBE_SERVER: "https://kube.example.com",
        KUBE_TOKEN: "t",
        AUDIT_TOKEN: credentials[cluster].auditToken,
        RELAY_SECRET: credentials[cluster].relaySecret,
        ...env,
      }),
      {
        cluster,
        kube: ctx.kube,
        queue: { send: async (messages) => void sent.push(...(messages as PassMessage[])) },
        prober: {} as never,
        log: ctx.log,
        metrics: ctx.metrics,
        clock: ctx.clock,
      },
      { registry: createRegistry([proxyController({ reconcile: async () => done() })]), sweepTasks: [] },
    );
    return { cluster, kubefn, credentials: credentials[cluster], sent };
  };
  const a = member("a");
  const b = member("b");
  return { a, b, fetch: fleetFetch([a, b]) };
}

const relayPost = async (secret: string, query = "") =>
  new Request(`http://kubefn.test/v1/events${query}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(await signBatch(secret, batch, NOW.getTime() / 1000)),
    },
    body: batch,
  });
const auditPost = (token: string, query = "") =>
  new Request(`http://kubefn.test/v1/events${query}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: auditBatch,
  });

describe("fleet intake: a batch is the cluster's whose credential it presented", () => {
  it("a relay batch signed with cluster A's secret, naming cluster B, is refused: nothing is enqueued for B", async () => {
    const { a, b, fetch } = fleet();
    const res = await fetch(await relayPost(credentials.a.relaySecret, "?cluster=b"));
    expect(res.status).toBe(401);
    expect(b.sent).toEqual([]);
    expect(a.sent).toEqual([]);
  });

  it("the same batch for cluster A is A's: its messages name cluster A, none reach B", async () => {
    const { a, b, fetch } = fleet();
    const res = await fetch(await relayPost(credentials.a.relaySecret, "?cluster=a"));
    expect(res.status).toBe(202);
    expect(a.sent.map((m) => [m.cluster, m.request.name])).toEqual([["a", "p1"]]);
    expect(b.sent).toEqual([]);
  });

  it("an audit batch with cluster A's token is A's, whatever it names; asking for B with it is refused", async () => {
    const { a, b, fetch } = fleet();
    expect((await fetch(auditPost(credentials.a.auditToken))).status).toBe(202);
    expect(a.sent.map((m) => m.cluster)).toEqual(["a"]);
    expect(b.sent).toEqual([]);
    expect((await fetch(auditPost(credentials.a.auditToken, "?cluster=b"))).status).toBe(401);
    expect(b.sent).toEqual([]);
  });

  it("a token of no declared cluster, or a relay batch that names no cluster among two, is refused", async () => {
    const { a, b, fetch } = fleet();
    expect((await fetch(auditPost("audit-token-of-nobody-0123456789"))).status).toBe(401);
    expect((await fetch(await relayPost(credentials.b.relaySecret))).status).toBe(401);
    expect([...a.sent, ...b.sent]).toEqual([]);
  });
});

describe("the fleet page of a fleet (issue 35)", () => {
  const apiToken = "fleet-api-token-0123456789";
  const get = (fetch: (r: Request) => Promise<Response>, path: string) =>
    fetch(new Request(`http://kubefn.test${path}`, { headers: { authorization: `Bearer ${apiToken}` } }));

  it("GET / shows every cluster's objects, each under its cluster's name; ?cluster= shows one", async () => {
    const { fetch } = fleet({ API_TOKEN: apiToken });
    const res = await get(fetch, "/");
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html.indexOf("<h2>Cluster a</h2>")).toBeGreaterThan(0);
    expect(html.indexOf("proxy-of-a")).toBeGreaterThan(html.indexOf("<h2>Cluster a</h2>"));
    expect(html.indexOf("<h2>Cluster b</h2>")).toBeGreaterThan(html.indexOf("proxy-of-a"));
    expect(html.indexOf("proxy-of-b")).toBeGreaterThan(html.indexOf("<h2>Cluster b</h2>"));
    const onlyB = await (await get(fetch, "/?cluster=b")).text();
    expect(onlyB).toContain("proxy-of-b");
    expect(onlyB).not.toContain("proxy-of-a");
  });

  it("is behind the API token as one cluster's page is", async () => {
    const { fetch } = fleet({ API_TOKEN: apiToken });
    expect((await fetch(new Request("http://kubefn.test/"))).status).toBe(401);
    expect((await fleet().fetch(new Request("http://kubefn.test/"))).status).toBe(404);
  });
});

describe("a cluster's telemetry", () => {
  it("puts the cluster on every log line and every series, and forgets only its own", () => {
    const lines: unknown[] = [];
    const series: unknown[] = [];
    const forgotten: boolean[] = [];
    const log = clusterLog(
      { info: (...l) => lines.push(l), warn: (...l) => lines.push(l), error: (...l) => lines.push(l) },
      "east",
    );
    log.info("pass", { key: "proxy/ns/p" });
    expect(lines).toEqual([["pass", { cluster: "east", key: "proxy/ns/p" }]]);
    const metrics = clusterMetrics(
      {
        count: (...s) => series.push(s),
        observe: () => {},
        gauge: () => {},
        forget: (_name, which) => {
          if (typeof which === "function")
            forgotten.push(which({ cluster: "east" }), which({ cluster: "west" }));
        },
      },
      "east",
    );
    metrics.count("kubefn_passes_total", { controller: "proxy" });
    expect(series).toEqual([["kubefn_passes_total", { controller: "proxy", cluster: "east" }, undefined]]);
    metrics.forget?.("kubefn_probe_up", () => true);
    expect(forgotten).toEqual([true, false]);
  });
});
