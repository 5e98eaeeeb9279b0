/**
 * Back-pressure per platform invocation: the request budget bounds one invocation (a queue
 * batch, a Lambda event, a sweep) across its passes, not each pass; and while the instance's
 * circuit is open a sweep fans nothing out and sends nothing.
 */
import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../../functions/cloudflare/config.ts";
import { REQUIRED_ADMISSION_POLICIES } from "../../../shared/app/admission/index.ts";
import { createKubefn } from "../../../shared/app/kubefn.ts";
import { guardedKube, type Transport, type TransportRequest } from "../../../shared/kube/index.ts";
import { createRegistry, done, type Message, type SweepTask } from "../../../shared/runtime/index.ts";
import { fakeContext } from "../../support/fake-kube.ts";
import { ProxyResource, proxyController } from "../runtime/controllers.ts";

const proxyJson = JSON.stringify({
  apiVersion: "crawl.example.com/v1alpha1",
  kind: "Proxy",
  metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1, resourceVersion: "1" },
  spec: {},
  status: { observedGeneration: 1 },
});
const listJson = `{"kind":"ProxyList","metadata":{"resourceVersion":"1"},"items":[${proxyJson}]}`;

/** kubefn's admission policies and bindings, as an installed cluster lists them. */
const admissionJson = (path: string) => {
  const binding = path.includes("bindings");
  return JSON.stringify({
    metadata: { resourceVersion: "1" },
    items: REQUIRED_ADMISSION_POLICIES.map((name) => ({
      metadata: { name },
      ...(binding ? { spec: { policyName: name, validationActions: ["Deny"] } } : {}),
    })),
  });
};

/**
 * An API server that answers every request with `status()`: the Proxy, or an empty list. The
 * admission gate's lists (shared/app/admission) find the policies installed and are not counted.
 */
function apiServer(status: () => number) {
  const reached: TransportRequest[] = [];
  const transport: Transport = {
    async request(req) {
      if (req.path.startsWith("/apis/admissionregistration.k8s.io/")) {
        return { status: 200, headers: new Headers(), body: admissionJson(req.path) };
      }
      reached.push(req);
      const s = status();
      const isList = req.method === "GET" && !req.path.split("?")[0]!.endsWith("/p1");
      return { status: s, headers: new Headers(), body: s >= 300 ? "" : isList ? listJson : proxyJson };
    },
  };
  return { transport, reached };
}

/**
 * kubefn over `apiServer`, with a Proxy controller whose every pass sends `extraGets` GETs, and a
 * sweep task that sends 3 GETs.
 */
function kubefnOver(server: ReturnType<typeof apiServer>, requestBudget: number, extraGets = 4) {
  const settings = { ...parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" }) };
  settings.requestBudget = requestBudget;
  // One pass at a time, so that which pass finds the budget spent is certain.
  settings.passConcurrency = 1;
  settings.circuit = { failureThreshold: 3, openSeconds: 60 };
  const guarded = guardedKube(server.transport, settings);
  const { ctx, recorded } = fakeContext(guarded.kube);
  const controller = proxyController({
    reconcile: async (pass) => {
      for (let i = 0; i < extraGets; i++)
        await pass.kube.get(ProxyResource, { namespace: "ns1", name: "p1" });
      return done();
    },
  });
  const kubefn = createKubefn(
    settings,
    {
      ...guarded,
      queue: ctx.queue,
      prober: { probe: async () => ({ ok: true }) } as never,
      log: ctx.log,
      metrics: ctx.metrics,
    },
    { registry: createRegistry([controller]), sweepTasks: [threeGets] },
  );
  return { kubefn, guarded, recorded };
}

const threeGets: SweepTask = {
  name: "three-gets",
  controller: "proxy",
  start: (ctx) => ({
    async page() {},
    async finish() {
      for (let i = 0; i < 3; i++) await ctx.kube.get(ProxyResource, { namespace: "ns1", name: "p1" });
      return { gets: 3 };
    },
  }),
};

const message: Message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };

/** One delivery of `count` copies of `message`: the passes' results. */
async function passes(kubefn: ReturnType<typeof kubefnOver>["kubefn"], count = 1) {
  const verdicts = await kubefn.consume(Array.from({ length: count }, () => ({ body: message })));
  return verdicts.map((v) => (v.ack ? v.pass : undefined));
}

describe("the request budget per platform invocation", () => {
  it("is shared by the passes of one invocation (a queue batch): the third pass of three finds it spent", async () => {
    const server = apiServer(() => 200);
    // Each pass sends 5 requests (its read, then 4 GETs); 12 requests per invocation.
    const { kubefn, guarded } = kubefnOver(server, 12);
    const results = await passes(kubefn, 3);
    expect(results.map((r) => [r?.result, r?.errorReason])).toEqual([
      ["done", undefined],
      ["done", undefined],
      ["error", "RequestBudgetExhausted"],
    ]);
    expect(server.reached).toHaveLength(12);
    expect(guarded.guard.stats().overBudget).toBe(1);
    // The failed pass has a follow-up: nothing is lost, it comes back in a later invocation.
    expect(results[2]?.followUpSeconds).toBeGreaterThan(0);
  });

  it("is fresh for each invocation: each `consume` call is an invocation of its own (the Node host's pass)", async () => {
    const server = apiServer(() => 200);
    const { kubefn } = kubefnOver(server, 5);
    for (let i = 0; i < 3; i++) expect((await passes(kubefn))[0]?.result).toBe("done");
    expect(server.reached).toHaveLength(15);
  });

  it("bounds a sweep (a cron invocation) across its lists and tasks", async () => {
    const server = apiServer(() => 200);
    // The list, then the task's 3 GETs: 4 requests; the budget allows 3.
    const { kubefn, guarded } = kubefnOver(server, 3);
    const summary = await kubefn.sweep();
    expect(summary.controllers.proxy?.listed).toBe(1);
    expect(summary.tasks["three-gets"]).toMatchObject({
      error: expect.stringMatching(/sent its 3 requests/),
    });
    expect(server.reached).toHaveLength(3);
    expect(guarded.guard.stats().overBudget).toBe(1);
    // The next cron run has a budget of its own.
    expect((await kubefn.sweep()).controllers.proxy?.listed).toBe(1);
    expect(server.reached).toHaveLength(6);
  });
});

describe("the circuit stops fan-out", () => {
  it("while it is open a sweep sends no request and no message; once the server answers, it sweeps again", async () => {
    const server = apiServer(() => 503);
    const { kubefn, guarded, recorded } = kubefnOver(server, 1000, 0);
    for (let i = 0; i < 3; i++) await passes(kubefn);
    expect(guarded.guard.stats().state).toBe("open");
    const reachedBefore = server.reached.length;

    const held = await kubefn.sweep({ full: true });
    expect(held.heldBack).toBe(true);
    expect(server.reached).toHaveLength(reachedBefore);
    expect(recorded.sent.filter((s) => s.messages.some((m) => m.trigger?.kind === "start"))).toEqual([]);

    // A pass meanwhile is held back by the circuit too: no request, a follow-up after the open period.
    const [pass] = await passes(kubefn);
    expect(pass).toMatchObject({ result: "error", errorReason: "CircuitOpen" });
    expect(server.reached).toHaveLength(reachedBefore);

    expect(guarded.apiFailing()).toBe(true);
  });

  it("(control) with the circuit closed the same full sweep sends each Proxy a pass", async () => {
    const server = apiServer(() => 200);
    const { kubefn, recorded } = kubefnOver(server, 1000, 0);
    const summary = await kubefn.sweep({ full: true });
    expect(summary.heldBack).toBeUndefined();
    expect(recorded.sent.flatMap((s) => s.messages).map((m) => m.trigger?.kind)).toEqual(["start"]);
  });
});
