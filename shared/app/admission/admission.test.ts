import { readFileSync } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseWorkerEnv } from "../../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext, seedAdmissionPolicies } from "../../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../../test/unit/runtime/controllers.ts";
import { ForbiddenError, ServerError } from "../../kube/errors.ts";
import type { Kube } from "../../kube/index.ts";
import type { Metrics, Queue } from "../../runtime/index.ts";
import { createRegistry, done } from "../../runtime/index.ts";
import { createKubefn } from "../kubefn.ts";
import {
  admissionProblems,
  CHECK_GIVEN_UP_SECONDS,
  checkAdmissionPolicies,
  createAdmissionGate,
  REQUIRED_ADMISSION_POLICIES,
  ValidatingAdmissionPolicyBindings,
} from "./index.ts";

const rbac = (file: string) =>
  parseAllDocuments(readFileSync(new URL(`../../../infra/rbac/${file}`, import.meta.url), "utf8"))
    .map(
      (d) => d.toJSON() as { kind: string; metadata: { name: string }; spec: { policyName?: string } } | null,
    )
    .filter((o) => o !== null);

const gauges: Array<[string, number]> = [];
function gateOver(kube: FakeKube, clock = { t: 0 }) {
  const { ctx, recorded } = fakeContext(kube);
  gauges.length = 0;
  const gate = createAdmissionGate({
    kube,
    clock: { now: () => new Date(Date.UTC(2026, 10, 30) + clock.t * 1000) },
    log: ctx.log,
    metrics: { ...ctx.metrics, gauge: (name, value) => void gauges.push([name, value]) },
    recheckSeconds: 60,
  });
  return { gate, recorded };
}

/** A 503: the API server did not answer the request. */
const unavailable = () =>
  new ServerError("injected: the server is currently unable to handle the request", {
    status: 503,
    reason: "ServiceUnavailable",
  });

const lists = (kube: FakeKube) => kube.calls.filter((c) => c.method === "list").length;

describe("the required admission policies", () => {
  it("are every policy of infra/rbac, each bound by a binding of its name", () => {
    const objects = ["admission-policy.yaml", "admission-policy-shapes.yaml"].flatMap(rbac);
    const policies = objects
      .filter((o) => o.kind === "ValidatingAdmissionPolicy")
      .map((o) => o.metadata.name);
    const bindings = objects.filter((o) => o.kind === "ValidatingAdmissionPolicyBinding");
    expect([...REQUIRED_ADMISSION_POLICIES].sort()).toEqual([...policies].sort());
    for (const b of bindings) expect(b.spec.policyName).toBe(b.metadata.name);
    expect(bindings.map((b) => b.metadata.name).sort()).toEqual([...policies].sort());
  });
});

describe("checkAdmissionPolicies", () => {
  it("is ready when every policy is installed and bound to deny", async () => {
    const report = await checkAdmissionPolicies(seedAdmissionPolicies(new FakeKube()));
    expect(report.ready).toBe(true);
    expect(report.items).toHaveLength(REQUIRED_ADMISSION_POLICIES.length * 2);
  });

  it.each([
    [
      "a deleted binding",
      (k: FakeKube) => k.delete(ValidatingAdmissionPolicyBindings, { name: "kubefn-writes-only-its-own" }),
      "ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is not installed",
    ],
    [
      "a binding that only audits",
      (k: FakeKube) =>
        k.seed(ValidatingAdmissionPolicyBindings, {
          apiVersion: "admissionregistration.k8s.io/v1",
          kind: "ValidatingAdmissionPolicyBinding",
          metadata: { name: "kubefn-never-edits-specs" },
          spec: { policyName: "kubefn-never-edits-specs", validationActions: ["Audit"] },
        } as never),
      "ValidatingAdmissionPolicyBinding kubefn-never-edits-specs does not deny (validationActions: Audit)",
    ],
    [
      "a binding of another policy",
      (k: FakeKube) =>
        k.seed(ValidatingAdmissionPolicyBindings, {
          apiVersion: "admissionregistration.k8s.io/v1",
          kind: "ValidatingAdmissionPolicyBinding",
          metadata: { name: "kubefn-state-is-kubefns" },
          spec: { policyName: "something-harmless", validationActions: ["Deny"] },
        } as never),
      "ValidatingAdmissionPolicyBinding kubefn-state-is-kubefns binds something-harmless, not kubefn-state-is-kubefns",
    ],
  ])("is not ready with %s, and says which", async (_, breakIt, problem) => {
    const kube = seedAdmissionPolicies(new FakeKube());
    await breakIt(kube);
    const report = await checkAdmissionPolicies(kube);
    expect(report.ready).toBe(false);
    expect(admissionProblems(report)).toEqual([problem]);
  });

  it("fails closed when the policies may not be listed", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    kube.fail(
      "list",
      new ForbiddenError("validatingadmissionpolicies is forbidden", { status: 403, reason: "Forbidden" }),
    );
    const report = await checkAdmissionPolicies(kube);
    expect(report.ready).toBe(false);
    expect(admissionProblems(report)[0]).toMatch(/^the admission policies could not be read: /);
  });
});

describe("the admission gate", () => {
  it("checks at most once per period, whatever the number of callers: two lists, one warning, gauge 0", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    await kube.delete(ValidatingAdmissionPolicyBindings, { name: "kubefn-writes-only-its-own" });
    const clock = { t: 0 };
    const { gate, recorded } = gateOver(kube, clock);
    const before = lists(kube);
    const answers = await Promise.all(Array.from({ length: 50 }, () => gate.open()));
    clock.t = 59;
    answers.push(await gate.open());
    expect(answers.every((a) => a === false)).toBe(true);
    expect(lists(kube) - before).toBe(2);
    expect(recorded.logs.filter((l) => l.level === "warn")).toEqual([
      {
        level: "warn",
        msg: expect.stringMatching(
          /^not reconciling: kubefn's admission policies are not installed and bound/,
        ),
        fields: {
          missing: "ValidatingAdmissionPolicyBinding kubefn-writes-only-its-own is not installed",
          recheckSeconds: 60,
        },
      },
    ]);
    expect(gauges).toEqual([["kubefn_admission_policies_ready", 0]]);

    seedAdmissionPolicies(kube);
    clock.t = 60;
    expect(await gate.open()).toBe(true);
    expect(lists(kube) - before).toBe(4);
    expect(gauges.at(-1)).toEqual(["kubefn_admission_policies_ready", 1]);
    expect(recorded.logs.at(-1)?.msg).toBe("admission policies installed and bound: reconciling again");
  });
});

describe("the admission gate when the API server cannot answer", () => {
  it("keeps the last answer while the check cannot be made, and asks again within seconds, not a period", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    const clock = { t: 0 };
    const { gate, recorded } = gateOver(kube, clock);
    expect(await gate.open()).toBe(true);
    const before = lists(kube);
    // The period's check: the API server answers neither list (a blip, the client's circuit open).
    kube.fail("list", unavailable());
    kube.fail("list", unavailable());
    clock.t = 60;
    expect(await gate.open()).toBe(true);
    expect(lists(kube) - before).toBe(2);
    expect(recorded.logs.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual([
      expect.stringMatching(/^the admission policies could not be checked: keeping the last answer/),
    ]);
    clock.t = 64;
    expect(await gate.open()).toBe(true);
    expect(lists(kube) - before).toBe(2);
    clock.t = 65;
    expect(await gate.open()).toBe(true);
    expect(lists(kube) - before).toBe(4);
    expect(gauges.at(-1)).toEqual(["kubefn_admission_policies_ready", 1]);
  });

  it("is closed while it has no answer to keep, and asks again within seconds", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    kube.fail("list", unavailable());
    const clock = { t: 0 };
    const { gate } = gateOver(kube, clock);
    expect(await gate.open()).toBe(false);
    expect(gate.waitSeconds()).toBe(5);
    clock.t = 5;
    expect(await gate.open()).toBe(true);
    expect(gate.waitSeconds()).toBe(60);
  });

  it("keeps no answer older than five periods: closed", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    const clock = { t: 0 };
    const { gate } = gateOver(kube, clock);
    expect(await gate.open()).toBe(true);
    for (const t of [60, 120, 180, 240, 300]) {
      clock.t = t;
      kube.fail("list", unavailable());
      expect(await gate.open()).toBe(true);
    }
    clock.t = 301;
    kube.fail("list", unavailable());
    expect(await gate.open()).toBe(false);
  });

  it("gives up a check that never settles (its Worker invocation was cut off mid-list) and checks again", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    let hang = true;
    let listed = 0;
    // On Workers, a list whose invocation the platform cut off may never settle, and its client
    // deadline goes with the invocation: the next invocations of the isolate must not wait on it.
    const cut: Pick<Kube, "list"> = {
      list: ((...args: Parameters<Kube["list"]>) => {
        listed++;
        return hang ? new Promise(() => undefined) : kube.list(...args);
      }) as Kube["list"],
    };
    const clock = { t: 0 };
    const { ctx } = fakeContext(kube);
    const gate = createAdmissionGate({
      kube: cut,
      clock: { now: () => new Date(Date.UTC(2026, 10, 30) + clock.t * 1000) },
      log: ctx.log,
      metrics: ctx.metrics,
      recheckSeconds: 60,
    });
    void gate.open();
    await vi.waitFor(() => expect(listed).toBe(2));
    hang = false;
    clock.t = CHECK_GIVEN_UP_SECONDS - 1;
    void gate.open();
    expect(listed).toBe(2);
    clock.t = CHECK_GIVEN_UP_SECONDS;
    expect(await gate.open()).toBe(true);
    expect(listed).toBe(4);
  });

  it("takes a refusal (403) as an answer: closed at once, whatever it said before", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    const clock = { t: 0 };
    const { gate } = gateOver(kube, clock);
    expect(await gate.open()).toBe(true);
    kube.fail(
      "list",
      new ForbiddenError("validatingadmissionpolicies is forbidden", { status: 403, reason: "Forbidden" }),
    );
    clock.t = 60;
    expect(await gate.open()).toBe(false);
    expect(gate.waitSeconds()).toBe(60);
  });
});

describe("createKubefn behind the gate", () => {
  function kubefnOver(
    kube: FakeKube,
    clock = { t: 0 },
    ports: { queue?: Queue; metrics?: Partial<Metrics> } = {},
  ) {
    let reconciled = 0;
    const { ctx, recorded } = fakeContext(kube);
    const settings = parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" });
    const kubefn = createKubefn(
      settings,
      {
        kube,
        queue: ports.queue ?? ctx.queue,
        prober: { probe: async () => ({ ok: true }) } as never,
        log: ctx.log,
        metrics: { ...ctx.metrics, ...ports.metrics },
        clock: { now: () => new Date(Date.UTC(2026, 10, 30) + clock.t * 1000) },
      },
      {
        registry: createRegistry([
          proxyController({
            reconcile: async () => {
              reconciled++;
              return done();
            },
          }),
        ]),
        sweepTasks: [],
      },
    );
    return { kubefn, recorded, reconciled: () => reconciled };
  }
  const message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };
  /** The Proxy `message` names, with `status` if given. */
  const seedProxy = (kube: FakeKube, status?: Record<string, unknown>) =>
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
      ...(status ? { status } : {}),
    });

  it("runs no pass without the policies: puts the message back for the re-check period, unchanged", async () => {
    const kube = new FakeKube(undefined, { admissionPolicies: false });
    const { kubefn, recorded, reconciled } = kubefnOver(kube);
    expect(await kubefn.consume([{ body: message }])).toEqual([{ ack: true }]);
    expect(reconciled()).toBe(0);
    expect(recorded.sent).toEqual([
      { messages: [expect.objectContaining({ request: message.request, attempt: 0 })], delaySeconds: 60 },
    ]);
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_deferred_total",
      labels: { reason: "AdmissionPoliciesNotReady" },
    });
    expect((await kubefn.sweep()).heldBack).toBe(true);
  });

  it("puts a pass back for seconds, not the re-check period, when the gate could not ask the API server", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    kube.fail("list", unavailable());
    const { kubefn, recorded, reconciled } = kubefnOver(kube);
    expect(await kubefn.consume([{ body: message }])).toEqual([{ ack: true }]);
    expect(reconciled()).toBe(0);
    expect(recorded.sent).toEqual([
      { messages: [expect.objectContaining({ request: message.request, attempt: 0 })], delaySeconds: 5 },
    ]);
  });

  it("a pass it could not put back is retried, and says so: logged at warn with why, and counted", async () => {
    const kube = new FakeKube(undefined, { admissionPolicies: false });
    const refusing: Queue = {
      send: async () => {
        throw new Error("injected: the queue refused the batch");
      },
    };
    const { kubefn, recorded, reconciled } = kubefnOver(kube, { t: 0 }, { queue: refusing });
    expect(await kubefn.consume([{ body: message, attempts: 2 }])).toEqual([
      { ack: false, retryAfterSeconds: 60 },
    ]);
    expect(reconciled()).toBe(0);
    const line = recorded.logs.find((l) => l.msg.includes("could not be put back"));
    expect(line?.level).toBe("warn");
    expect(line?.fields).toMatchObject({
      request: message.request,
      attempts: 2,
      retryAfterSeconds: 60,
      error: "Error: injected: the queue refused the batch",
    });
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_retried_total",
      labels: { reason: "defer-failed" },
    });
    // Its next delivery says it was redelivered, as does any whose invocation ended without a verdict.
    const redelivered = recorded.logs.find((l) => l.msg.includes("redelivered"));
    expect(redelivered?.level).toBe("warn");
    expect(redelivered?.fields).toMatchObject({ request: message.request, attempts: 2 });
    expect(recorded.counts).toContainEqual({ name: "kubefn_messages_redelivered_total", labels: {} });
  });

  it("a delivery that throws before its pass runs fails only its own message, logged and counted: the batch still settles", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    seedProxy(kube);
    // The gate's check sets a gauge: a metrics port that throws there breaks the check itself.
    let broken = true;
    const { kubefn, recorded } = kubefnOver(
      kube,
      { t: 0 },
      {
        metrics: {
          gauge: () => {
            if (broken) throw new Error("injected: the metrics port threw");
          },
        },
      },
    );
    const verdicts = await kubefn.consume([{ body: message }, { body: { not: "a kubefn message" } }]);
    expect(verdicts[0]).toMatchObject({ ack: false });
    expect(verdicts[1]).toEqual({ ack: true, dropped: true });
    const line = recorded.logs.find((l) => l.msg.includes("delivery failed"));
    expect(line?.level).toBe("error");
    expect(line?.fields).toMatchObject({
      request: message.request,
      error: "Error: injected: the metrics port threw",
    });
    expect(recorded.counts).toContainEqual({
      name: "kubefn_messages_retried_total",
      labels: { reason: "crashed" },
    });
    broken = false;
    // (control) once the port works the same message runs its pass.
    expect(await kubefn.consume([{ body: message }])).toMatchObject([{ ack: true }]);
  });

  it("after held-back sweeps, the first sweep once the policies are back sends every object", async () => {
    const kube = new FakeKube(undefined, { admissionPolicies: false });
    seedProxy(kube, { observedGeneration: 1 });
    const clock = { t: 0 };
    const { kubefn, recorded } = kubefnOver(kube, clock);
    expect((await kubefn.sweep()).heldBack).toBe(true);
    seedAdmissionPolicies(kube);
    clock.t = 60;
    expect((await kubefn.sweep()).heldBack).toBeUndefined();
    expect(recorded.sent.flatMap((s) => s.messages.map((m) => m.request.name))).toEqual(["p1"]);
    recorded.sent.length = 0;
    await kubefn.sweep();
    expect(recorded.sent).toEqual([]);
  });

  it("holds a sweep back while the check goes unanswered, without making the next one send every object", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    seedProxy(kube, { observedGeneration: 1 });
    kube.fail("list", unavailable());
    const clock = { t: 0 };
    const { kubefn, recorded } = kubefnOver(kube, clock);
    expect((await kubefn.sweep()).heldBack).toBe(true);
    clock.t = 5;
    expect((await kubefn.sweep()).heldBack).toBeUndefined();
    expect(recorded.sent).toEqual([]);
  });

  it("(control) with the policies installed the same message runs its pass", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    seedProxy(kube);
    const { kubefn, reconciled } = kubefnOver(kube);
    await kubefn.consume([{ body: message }]);
    expect(reconciled()).toBe(1);
  });
});
