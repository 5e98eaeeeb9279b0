import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseWorkerEnv } from "../../../functions/cloudflare/config.ts";
import { FakeKube, fakeContext, seedAdmissionPolicies } from "../../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../../test/unit/runtime/controllers.ts";
import { ForbiddenError } from "../../kube/errors.ts";
import { createRegistry, done } from "../../runtime/index.ts";
import { createKubefn } from "../kubefn.ts";
import {
  admissionProblems,
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

describe("createKubefn behind the gate", () => {
  function kubefnOver(kube: FakeKube, clock = { t: 0 }) {
    let reconciled = 0;
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

  it("after held-back sweeps, the first sweep once the policies are back sends every object", async () => {
    const kube = new FakeKube(undefined, { admissionPolicies: false });
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
      status: { observedGeneration: 1 },
    });
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

  it("(control) with the policies installed the same message runs its pass", async () => {
    const kube = seedAdmissionPolicies(new FakeKube());
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation: 1 },
      spec: {},
    });
    const { kubefn, reconciled } = kubefnOver(kube);
    await kubefn.consume([{ body: message }]);
    expect(reconciled()).toBe(1);
  });
});
