/**
 * The seam's `deadLetters`: what a dead letter may make kubefn write (a Warning Event about the
 * object it reads, only from a key that could name one), what it logs and counts, and when it
 * asks for the letter again. test/e2e/worker-dead-letters.test.ts runs it in workerd.
 */
import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { Resources, ServerError } from "../kube/index.ts";
import { createRegistry, done } from "../runtime/index.ts";
import { DEAD_LETTERED_REASON } from "./dead-letters.ts";
import { createKubefn } from "./kubefn.ts";

function kubefnWith() {
  const kube = new FakeKube();
  kube.seed(ProxyResource, {
    apiVersion: "crawl.example.com/v1alpha1",
    kind: "Proxy",
    metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
    spec: {},
  });
  const { ctx, recorded } = fakeContext(kube);
  const settings = parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" });
  const kubefn = createKubefn(
    settings,
    {
      kube,
      queue: ctx.queue,
      prober: { probe: async () => ({ ok: true }) } as never,
      log: ctx.log,
      metrics: ctx.metrics,
      clock: ctx.clock,
      random: () => 0.5,
    },
    { registry: createRegistry([proxyController({ reconcile: async () => done() })]), sweepTasks: [] },
  );
  const events = () =>
    kube.calls.filter((c) => c.method === "create" && c.resource === Resources.Event.resource);
  return { kubefn, kube, recorded, events };
}

const pass = (request: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  v: 2,
  attempt: 4,
  request,
  ...extra,
});

describe("deadLetters", () => {
  it("records a dead pass as a Warning Event about the object read, not the one the letter describes", async () => {
    const { kubefn, recorded, events } = kubefnWith();
    const verdicts = await kubefn.deadLetters([
      {
        body: pass(
          { controller: "proxy", namespace: "ns1", name: "p1" },
          { uid: "forged", note: "rotate your tokens at evil.example" },
        ),
      },
    ]);
    expect(verdicts).toEqual([{ ack: true }]);
    const [created] = events();
    expect(created?.body).toMatchObject({
      type: "Warning",
      reason: DEAD_LETTERED_REASON,
      reportingController: "kubefn.dev/proxy",
      regarding: { kind: "Proxy", namespace: "ns1", name: "p1", uid: "uid-p1" },
    });
    expect(JSON.stringify(created?.body)).not.toMatch(/forged|evil\.example/);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_dead_letters_total",
      labels: { controller: "proxy", kind: "pass" },
    });
    expect(recorded.logs.find((l) => l.msg.startsWith("dead letter"))).toMatchObject({
      level: "error",
      fields: { request: { controller: "proxy", namespace: "ns1", name: "p1" }, uid: "uid-p1" },
    });
  });

  it.each([
    [
      "an unregistered controller",
      pass({ controller: "secrets", namespace: "ns1", name: "p1" }),
      "pass",
      "unknown",
    ],
    [
      "a name no object has",
      pass({ controller: "proxy", namespace: "ns1", name: "a/../b" }),
      "pass",
      "proxy",
    ],
    [
      "a namespace no namespace has",
      pass({ controller: "proxy", namespace: "NS 1", name: "p1" }),
      "pass",
      "proxy",
    ],
    ["a namespaced kind without a namespace", pass({ controller: "proxy", name: "p1" }), "pass", "proxy"],
    [
      "an object that is not there",
      pass({ controller: "proxy", namespace: "ns2", name: "p1" }),
      "pass",
      "proxy",
    ],
    ["a newer release's message", { v: 9, request: { controller: "proxy", name: "p1" } }, "newer", "unknown"],
    [
      "a job",
      { kind: "job", v: 2, job: { controller: "proxy", task: "probe", slot: "0", objects: [] } },
      "job",
      "proxy",
    ],
    ["text", "kubefn says: delete everything", "invalid", "unknown"],
  ])("%s: acked, logged and counted, nothing written", async (_, body, kind, controller) => {
    const { kubefn, kube, recorded } = kubefnWith();
    expect(await kubefn.deadLetters([{ body }])).toEqual([{ ack: true }]);
    expect(kube.writes()).toBe(0);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_dead_letters_total",
      labels: { controller, kind },
    });
    const lines = recorded.logs.filter((l) => l.msg.startsWith("dead letter"));
    expect(lines).toHaveLength(1);
    expect(JSON.stringify(lines)).not.toMatch(/secrets|a\/\.\.\/b|NS 1|delete everything/);
  });

  it("asks for the letter again when its object cannot be read, with a backoff, and writes nothing", async () => {
    const { kubefn, kube, recorded } = kubefnWith();
    kube.fail(
      "get",
      new ServerError("the API server is restarting", { status: 503, reason: "ServiceUnavailable" }),
    );
    const [verdict] = await kubefn.deadLetters([
      { body: pass({ controller: "proxy", namespace: "ns1", name: "p1" }), attempts: 2 },
    ]);
    expect(verdict).toMatchObject({ ack: false });
    expect(verdict?.ack === false && verdict.retryAfterSeconds).toBeGreaterThan(0);
    expect(kube.writes()).toBe(0);
    expect(recorded.counts.filter((c) => c.name === "kubefn_dead_letters_total")).toEqual([]);
  });
});
