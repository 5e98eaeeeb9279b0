/**
 * The Node host's state changes as CloudEvents over HTTP, to a local receiver: every listed
 * change in structured and in binary mode, with the attributes the spec requires; through
 * createKubefn (the port as the host binds it), a pass publishes only when its status write
 * changed a condition; a receiver that refuses costs the pass nothing.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createKubefn } from "../../shared/app/index.ts";
import { proxyStateChanges } from "../../shared/controllers/proxy/state-changes.ts";
import { cloudEventType } from "../../shared/runtime/core/index.ts";
import { createRegistry, done, StateChangeType } from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import { condition, everyChange, NOW } from "../../test/support/state-changes.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { parseNodeHostEnv } from "./config.ts";
import { cloudEventsStateChanges } from "./state-changes.ts";

interface Received {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

let server: Server;
let url: string;
let received: Received[] = [];
let answer = 202;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8");
    });
    req.on("end", () => {
      received.push({ headers: req.headers, body: JSON.parse(body) as Record<string, unknown> });
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  received = [];
  answer = 202;
});

describe("CloudEvents: kubefn's state changes to a receiver", () => {
  it("structured mode: each listed change is one application/cloudevents+json POST", async () => {
    const changes = everyChange();
    await cloudEventsStateChanges({ url, mode: "structured" }).publish(changes);
    expect(received).toHaveLength(changes.length);
    expect(received.map((r) => r.body.type).sort()).toEqual(
      Object.values(StateChangeType).map(cloudEventType).sort(),
    );
    for (const r of received) {
      expect(r.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
      expect(r.body).toMatchObject({
        specversion: "1.0",
        source: "kubefn",
        datacontenttype: "application/json",
      });
      expect(typeof r.body.id).toBe("string");
      expect((r.body.data as { version: string }).version).toBe("1");
    }
    const unhealthy = received.find((r) => r.body.type === "dev.kubefn.proxy.unhealthy");
    expect(unhealthy?.body.subject).toBe("Proxy/ns1/proxy-1");
    expect(new Set(received.map((r) => r.body.id)).size).toBe(changes.length);
  });

  it("binary mode: the attributes as ce- headers, the detail as the JSON body", async () => {
    const changes = everyChange();
    await cloudEventsStateChanges({ url, mode: "binary" }).publish(changes);
    expect(received).toHaveLength(changes.length);
    const refused = received.find((r) => r.headers["ce-type"] === "dev.kubefn.subpool.refused");
    expect(refused?.headers).toMatchObject({
      "ce-specversion": "1.0",
      "ce-source": "kubefn",
      "ce-subject": "SubPool/subpool-1",
      "content-type": "application/json",
    });
    expect(refused?.body).toMatchObject({
      version: "1",
      condition: { type: "Ready", status: "False", reason: "NamespaceConflict" },
    });
  });

  it("a receiver's refusal is an error of the sink (the runtime logs and counts it)", async () => {
    answer = 500;
    await expect(
      cloudEventsStateChanges({ url, mode: "structured" }).publish(everyChange().slice(0, 1)),
    ).rejects.toThrow(/answered 500 to Proxy Ready/);
  });
});

describe("the Node host's passes publish what they change", () => {
  const warnings: string[] = [];
  const counted: Record<string, number> = {};
  const kubefnWith = (kube: FakeKube) =>
    createKubefn(
      parseNodeHostEnv({ KUBECONFIG: "unused: the kube port is given" }).settings,
      {
        kube,
        queue: { async send() {} },
        inProcessQueue: true,
        prober: { probe: async () => ({ ok: true, latencyMs: 1 }) } as never,
        clock: { now: () => NOW },
        log: { info() {}, warn: (msg) => warnings.push(msg), error() {} },
        metrics: {
          count: (name, labels, value = 1) => {
            const key = `${name}${labels?.reason ? `{${labels.reason}}` : ""}`;
            counted[key] = (counted[key] ?? 0) + value;
          },
          observe() {},
          gauge() {},
        },
        stateChanges: cloudEventsStateChanges({ url, mode: "structured" }),
      },
      {
        registry: createRegistry([
          proxyController({
            async reconcile(_ctx, proxy) {
              proxy.status = { conditions: [condition("Healthy", "False", "ProbeFailed")] };
              return done();
            },
            stateChanges: proxyStateChanges,
          }),
        ]),
        sweepTasks: [],
      },
    );
  const seeded = () => {
    const kube = new FakeKube(() => NOW);
    kube.seed(ProxyResource, {
      apiVersion: "example.kubefn.dev/v1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
      status: { conditions: [condition("Healthy", "True", "ProbeSucceeded")] },
    });
    return kube;
  };
  const message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };

  it("Healthy turning False posts dev.kubefn.proxy.unhealthy once; the next pass, changing nothing, posts nothing", async () => {
    const kubefn = kubefnWith(seeded());
    await kubefn.consume([{ body: message }]);
    expect(received.map((r) => r.body.type)).toEqual(["dev.kubefn.proxy.unhealthy"]);
    await kubefn.consume([{ body: message }]);
    expect(received).toHaveLength(1);
  });

  it("a receiver that refuses fails no pass: the change is logged and counted as dropped", async () => {
    answer = 503;
    const [verdict] = await kubefnWith(seeded()).consume([{ body: message }]);
    expect(verdict).toMatchObject({ ack: true, pass: { result: "done", wroteStatus: true } });
    expect(received).toHaveLength(1);
    expect(warnings).toContain("state changes could not be published");
    expect(counted["kubefn_state_changes_dropped_total{failed}"]).toBe(1);
  });

  it("a status forged to look otherwise is rewritten without a change published (a tenant cannot page through kubefn)", async () => {
    const settings = parseNodeHostEnv({
      KUBECONFIG: "unused: the kube port is given",
      STATUS_SEAL_KEY: "seal-key-of-kubefn-0123456789",
    }).settings;
    const kube = new FakeKube(() => NOW);
    kube.seed(ProxyResource, {
      apiVersion: "example.kubefn.dev/v1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: { healthy: true },
    });
    const kubefn = createKubefn(
      settings,
      {
        kube,
        queue: { async send() {} },
        inProcessQueue: true,
        prober: { probe: async () => ({ ok: true, latencyMs: 1 }) } as never,
        clock: { now: () => NOW },
        log: { info() {}, warn() {}, error() {} },
        metrics: { count() {}, observe() {}, gauge() {} },
        stateChanges: cloudEventsStateChanges({ url, mode: "structured" }),
      },
      {
        registry: createRegistry([
          proxyController({
            // The verdict from the spec: the test flips it as probes would.
            async reconcile(_ctx, proxy) {
              const up = (proxy.spec as { healthy: boolean }).healthy;
              const status = (proxy.status ?? {}) as Record<string, unknown>;
              status.conditions = [
                up
                  ? condition("Healthy", "True", "ProbeSucceeded")
                  : condition("Healthy", "False", "ProbeFailed"),
              ];
              proxy.status = status;
              return done();
            },
            stateChanges: proxyStateChanges,
          }),
        ]),
        sweepTasks: [],
      },
    );
    const stored = () => structuredClone(kube.stored(ProxyResource, { namespace: "ns1", name: "p1" })!);
    await kubefn.consume([{ body: message }]); // Healthy=True, sealed: a first appearance, no news
    const setSpec = (healthy: boolean) => {
      const p = stored();
      kube.seed(ProxyResource, { ...p, spec: { healthy } });
    };
    setSpec(false);
    await kubefn.consume([{ body: message }]);
    expect(received.map((r) => r.body.type)).toEqual(["dev.kubefn.proxy.unhealthy"]);

    // The tenant writes Healthy=True over kubefn's sealed False: the pass rewrites it to False.
    const p = stored();
    kube.seed(ProxyResource, {
      ...p,
      status: { ...(p.status as object), conditions: [condition("Healthy", "True", "ProbeSucceeded")] },
    });
    const [verdict] = await kubefn.consume([{ body: message }]);
    expect(verdict).toMatchObject({ ack: true, pass: { wroteStatus: true } });
    expect(received).toHaveLength(1);
  });
});
