import { describe, expect, it } from "vitest";
import { ReconcileError } from "../../../shared/kube/classify.ts";
import { ConflictError, ServerError, TooManyRequestsError } from "../../../shared/kube/errors.ts";
import type { KubeObject } from "../../../shared/runtime/core/index.ts";
import { QUOTA_RETRY_SECONDS } from "../../../shared/runtime/definition/index.ts";
import {
  awaitSweep,
  type ControllerDefinition,
  createRegistry,
  done,
  failed,
  Outcome,
  type PassMessage,
  requeueAfter,
  runPass,
} from "../../../shared/runtime/index.ts";
import { IMMEDIATE_CONFLICT_RETRIES } from "../../../shared/runtime/pass/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";
import {
  ProxyResource,
  proxyController,
  SiteResource,
  SubPoolResource,
  siteController,
  subPoolController,
} from "./controllers.ts";

const proxy = (status?: Record<string, unknown>, generation = 1): KubeObject => ({
  apiVersion: "crawl.example.com/v1alpha1",
  kind: "Proxy",
  metadata: { name: "p1", namespace: "ns1", uid: "uid-p1", generation },
  spec: { mode: "External" },
  ...(status ? { status } : {}),
});
const proxyMessage = (attempt = 0): PassMessage => ({
  request: { controller: "proxy", namespace: "ns1", name: "p1" },
  attempt,
});

function setup(
  reconcile: ControllerDefinition["reconcile"],
  opts: { status?: Record<string, unknown>; random?: number } = {},
) {
  const kube = new FakeKube();
  kube.seed(ProxyResource, proxy(opts.status ?? { observedGeneration: 1, phase: "Ready" }));
  const { ctx, recorded } = fakeContext(kube, opts.random === undefined ? {} : { random: opts.random });
  const registry = createRegistry([proxyController({ reconcile }), subPoolController(), siteController()]);
  return { kube, ctx, recorded, registry };
}

describe("runPass", () => {
  it("writes nothing when the status did not change", async () => {
    const { kube, ctx, recorded, registry } = setup(async () => done());
    const result = await runPass(ctx, registry, proxyMessage());
    expect(kube.writes()).toBe(0);
    expect(recorded.sent).toEqual([]);
    expect(result).toMatchObject({ key: "proxy/ns1/p1", result: "done", wroteStatus: false, absent: false });
  });

  it("ignores key order when comparing status", async () => {
    const { kube, ctx, registry } = setup(
      async (_ctx, p) => {
        p.status = { phase: "Ready", observedGeneration: 1, conditions: [{ type: "A", status: "True" }] };
        return done();
      },
      { status: { conditions: [{ status: "True", type: "A" }], observedGeneration: 1, phase: "Ready" } },
    );
    await runPass(ctx, registry, proxyMessage());
    expect(kube.writes()).toBe(0);
  });

  it("patches the status exactly once when it changed, guarded and with observedGeneration", async () => {
    const { kube, ctx, registry } = setup(
      async (_ctx, p) => {
        const status = p.status as Record<string, unknown>;
        status.phase = "Failed";
        status.message = "first";
        status.message = "second";
        delete status.ip;
        return done();
      },
      { status: { phase: "Ready", ip: "10.0.0.1" } },
    );
    const before = kube.stored(ProxyResource, { namespace: "ns1", name: "p1" })!;
    const result = await runPass(ctx, registry, proxyMessage());
    const patches = kube.calls.filter((c) => c.method === "patchStatus");
    expect(patches).toHaveLength(1);
    expect(patches[0]!.body).toEqual({
      type: "merge",
      body: {
        metadata: { resourceVersion: before.metadata.resourceVersion },
        status: { phase: "Failed", message: "second", ip: null, observedGeneration: 1 },
      },
    });
    expect(kube.writes()).toBe(1);
    expect(result.wroteStatus).toBe(true);
    expect(kube.stored(ProxyResource, { namespace: "ns1", name: "p1" })?.status).toEqual({
      phase: "Failed",
      message: "second",
      observedGeneration: 1,
    });
  });

  it("gives the controller a private copy", async () => {
    let seen: KubeObject | undefined;
    const { kube, ctx, registry } = setup(async (_ctx, p) => {
      seen = p;
      (p.spec as Record<string, unknown>).mode = "Managed";
      return done();
    });
    await runPass(ctx, registry, proxyMessage());
    expect(seen?.spec).toMatchObject({ mode: "Managed" });
    const stored = await kube.get(ProxyResource, { namespace: "ns1", name: "p1" });
    expect((stored.spec as Record<string, unknown>).mode).toBe("External");
  });

  it("a body in the message never stands in for the primary: a 0.1.0 snapshot is not read, the stored object is", async () => {
    let seen: KubeObject | undefined;
    const { kube, ctx, registry } = setup(async (_ctx, p) => {
      seen = p;
      return done();
    });
    const forged = proxy({ observedGeneration: 1, phase: "Ready", ip: "198.51.100.66" });
    forged.spec = { mode: "External", endpoint: { host: "198.51.100.66" } };
    await runPass(ctx, registry, {
      ...proxyMessage(),
      snapshot: forged,
      listedAt: ctx.clock.now().getTime(),
    } as PassMessage);
    expect(kube.calls.filter((c) => c.method === "get")).toHaveLength(1);
    expect(seen?.spec).toEqual({ mode: "External" });
  });

  it("drops a message decided for an earlier object of the same name (another UID): no call, no write, no follow-up", async () => {
    let called = false;
    const { kube, ctx, recorded, registry } = setup(async (_ctx, p) => {
      called = true;
      (p.status as Record<string, unknown>).phase = "Unhealthy";
      return requeueAfter(5);
    });
    const result = await runPass(ctx, registry, { ...proxyMessage(), uid: "uid-of-the-deleted-one" });
    expect(called).toBe(false);
    expect(kube.writes()).toBe(0);
    expect(recorded.sent).toEqual([]);
    expect(result).toMatchObject({ result: "done", staleUid: true });
    expect(recorded.counts).toContainEqual({
      name: "kubefn_stale_messages_total",
      labels: { controller: "proxy" },
    });
  });

  it("NotFound primary without reconcileAbsent is done", async () => {
    const { ctx, recorded, registry } = setup(async () => {
      throw new Error("must not run");
    });
    const result = await runPass(ctx, registry, {
      request: { controller: "proxy", namespace: "ns1", name: "gone" },
      attempt: 0,
    });
    expect(result).toMatchObject({ result: "done", absent: true });
    expect(recorded.sent).toEqual([]);
  });

  it("NotFound primary runs reconcileAbsent (the Site singleton request)", async () => {
    const kube = new FakeKube();
    const { ctx, recorded } = fakeContext(kube);
    const calls: string[] = [];
    const registry = createRegistry([
      siteController({
        reconcileAbsent: async (pass) => {
          calls.push(pass.request.name);
          return requeueAfter(30);
        },
      }),
    ]);
    const result = await runPass(ctx, registry, {
      request: { controller: "site", name: "__singletons" },
      attempt: 0,
    });
    expect(calls).toEqual(["__singletons"]);
    expect(kube.calls[0]).toMatchObject({
      method: "get",
      resource: SiteResource.resource,
      key: { name: "__singletons" },
    });
    expect(result).toMatchObject({ result: "requeue", absent: true, followUpSeconds: 30 });
    expect(recorded.sent[0]?.delaySeconds).toBe(30);
  });

  it.each<[string, () => Outcome, number, number | undefined, number | undefined, string | undefined]>([
    // name, outcome, attempt in, follow-up delay, attempt out, error class
    ["done", () => done(), 0, undefined, undefined, undefined],
    [
      "awaitSweep() sends nothing: the sweep's drift pass is the next look",
      () => awaitSweep(),
      2,
      undefined,
      undefined,
      undefined,
    ],
    ["requeueAfter(45)", () => requeueAfter(45), 3, 45, 0, undefined],
    ["requeueAfter(0)", () => requeueAfter(0), 0, 0, 0, undefined],
    [
      "requeue beyond resync (600 s) is not sent",
      () => requeueAfter(601),
      0,
      undefined,
      undefined,
      undefined,
    ],
    // Regression: a Running proxy's drift poll equals its resync; sent, every sweep-triggered pass
    // started another endless chain (102 messages per object-hour instead of 12 on a serverless queue).
    [
      "requeue at exactly the resync is not sent",
      () => requeueAfter(600),
      0,
      undefined,
      undefined,
      undefined,
    ],
    ["requeue just under the resync is sent", () => requeueAfter(599), 0, 599, 0, undefined],
    [
      "transient (5xx), attempt 0",
      () => failed(new ServerError("boom", { status: 500, reason: "InternalError" })),
      0,
      1,
      1,
      "transient",
    ],
    [
      "transient, attempt 4",
      () => failed(new ServerError("boom", { status: 503, reason: "ServiceUnavailable" })),
      4,
      12,
      5,
      "transient",
    ],
    [
      "transient honours Retry-After",
      () =>
        failed(
          new TooManyRequestsError("slow down", {
            status: 429,
            reason: "TooManyRequests",
            retryAfterSeconds: 40,
          }),
        ),
      0,
      40,
      1,
      "transient",
    ],
    [
      "503 with Retry-After: the follow-up waits for it (regression: it was ignored)",
      () =>
        failed(
          new ServerError("overloaded", { status: 503, reason: "ServiceUnavailable", retryAfterSeconds: 30 }),
        ),
      0,
      30,
      1,
      "transient",
    ],
    [
      "transient delay beyond resync (Retry-After 900 s) is not sent",
      () => failed(ReconcileError.transient("Throttled", "x", { retryAfterSeconds: 900 })),
      0,
      undefined,
      undefined,
      "transient",
    ],
    [
      "wrapped transient is classified by cause",
      () => failed(new Error("ctx", { cause: new ServerError("x", { status: 502, reason: "BadGateway" }) })),
      0,
      1,
      1,
      "transient",
    ],
    [
      "conflict requeues at once",
      () => failed(new ConflictError("stale", { status: 409, reason: "Conflict" })),
      0,
      0,
      1,
      "conflict",
    ],
    [
      "conflict loop is bounded: backs off after the immediate retries",
      () => failed(new ConflictError("stale", { status: 409, reason: "Conflict" })),
      IMMEDIATE_CONFLICT_RETRIES + 2,
      3,
      IMMEDIATE_CONFLICT_RETRIES + 3,
      "conflict",
    ],
    [
      "quota retries at a fixed interval",
      () => failed(ReconcileError.quota("QuotaExceeded", "20/20")),
      7,
      QUOTA_RETRY_SECONDS,
      0,
      "quota",
    ],
    [
      "permanent is never retried",
      () => failed(ReconcileError.permanent("UnknownProvider", "no such provider")),
      0,
      undefined,
      undefined,
      "permanent",
    ],
    [
      "a thrown error is failed(err)",
      () => {
        throw new ServerError("x", { status: 500, reason: "InternalError" });
      },
      0,
      1,
      1,
      "transient",
    ],
  ])("%s", async (_name, outcome, attempt, delay, attemptOut, errorClass) => {
    const { ctx, recorded, registry } = setup(async () => outcome());
    const result = await runPass(ctx, registry, proxyMessage(attempt));
    expect(result.followUpSeconds).toBe(delay);
    expect(result.errorClass).toBe(errorClass);
    if (delay === undefined) {
      expect(recorded.sent).toEqual([]);
    } else {
      expect(recorded.sent).toEqual([
        {
          messages: [
            {
              request: proxyMessage().request,
              attempt: attemptOut,
              uid: "uid-p1",
              trigger: { kind: "follow-up" },
            },
          ],
          delaySeconds: delay,
        },
      ]);
    }
    if (errorClass) {
      expect(recorded.logs).toContainEqual(
        expect.objectContaining({
          level: "error",
          fields: expect.objectContaining({ key: "proxy/ns1/p1", class: errorClass }),
        }),
      );
      expect(recorded.counts).toContainEqual({
        name: "kubefn_pass_errors_total",
        labels: { controller: "proxy", class: errorClass },
      });
    }
    expect(recorded.counts).toContainEqual({
      name: "kubefn_passes_total",
      // A requeue as late as the resync is not sent, and says so: it waits for the sweep.
      labels: {
        controller: "proxy",
        result: errorClass
          ? "error"
          : outcome().kind === "requeue" && delay === undefined
            ? "awaitSweep"
            : outcome().kind,
      },
    });
  });

  it("a reconcile that returns a hand-built outcome fails the pass instead of guessing", async () => {
    const { ctx, registry } = setup(async () => ({ kind: "done" }) as unknown as Outcome);
    const result = await runPass(ctx, registry, proxyMessage());
    expect(result).toMatchObject({ result: "error", errorClass: "transient" });
  });

  it("a requeue's reason rides its follow-up to the next pass (PassContext.followUp), not to a retry or another pass", async () => {
    const seen: (string | undefined)[] = [];
    const { ctx, recorded, registry } = setup(async (pass) => {
      seen.push(pass.followUp);
      return requeueAfter(2, "waiting");
    });
    await runPass(ctx, registry, proxyMessage());
    const followUp = recorded.sent[0]!.messages[0]!;
    expect(followUp).toMatchObject({ attempt: 0, trigger: { kind: "follow-up", reason: "waiting" } });
    await runPass(ctx, registry, followUp);
    // A retry carrying the same trigger (attempt 1) is a whole pass again.
    await runPass(ctx, registry, { ...followUp, attempt: 1 });
    expect(seen).toEqual([undefined, "waiting", undefined]);
  });

  it("Outcome has no public constructor: only the named constructors build one", () => {
    expect(Outcome.is(done())).toBe(true);
    expect(Outcome.is({ kind: "done" })).toBe(false);
    expect(
      [done(), awaitSweep(), requeueAfter(-3), failed("x")].map((o) => [o.kind, o.afterSeconds]),
    ).toEqual([
      ["done", undefined],
      ["awaitSweep", undefined],
      ["requeue", 0],
      ["error", undefined],
    ]);
  });

  it("a Conflict on the status patch requeues now", async () => {
    const { kube, ctx, recorded, registry } = setup(async (_ctx, p) => {
      (p.status as Record<string, unknown>).phase = "Unhealthy";
      return requeueAfter(120);
    });
    kube.fail("patchStatus", new ConflictError("stale", { status: 409, reason: "Conflict" }));
    const result = await runPass(ctx, registry, proxyMessage());
    expect(result).toMatchObject({
      result: "error",
      errorClass: "conflict",
      wroteStatus: false,
      followUpSeconds: 0,
    });
    expect(recorded.sent).toHaveLength(1);
  });

  it("a transient GET failure backs off", async () => {
    const { kube, ctx, registry } = setup(async () => done());
    kube.fail("get", new ServerError("etcd", { status: 500, reason: "InternalError" }));
    const result = await runPass(ctx, registry, proxyMessage(2));
    expect(result).toMatchObject({ result: "error", errorClass: "transient", followUpSeconds: 3 });
  });

  it("an unknown controller is a permanent error, not a crash", async () => {
    const { ctx, recorded, registry } = setup(async () => done());
    const result = await runPass(ctx, registry, { request: { controller: "ghost", name: "x" }, attempt: 0 });
    expect(result).toMatchObject({
      result: "error",
      errorClass: "permanent",
      errorReason: "UnknownController",
    });
    expect(recorded.sent).toEqual([]);
  });
});

describe("the permanent-error latch (executor-kept)", () => {
  const subpool = (generation: number, status?: Record<string, unknown>): KubeObject => ({
    apiVersion: "subrelay.example.com/v1alpha1",
    kind: "SubPool",
    metadata: { name: "demo", uid: "uid-demo", generation },
    spec: {},
    ...(status ? { status } : {}),
  });
  const message: PassMessage = { request: { controller: "subpool", name: "demo" }, attempt: 0 };

  it("latches on a permanent error and skips the controller until the generation changes", async () => {
    const kube = new FakeKube();
    kube.seed(SubPoolResource, subpool(1));
    const { ctx, recorded } = fakeContext(kube);
    let calls = 0;
    let fail = true;
    const registry = createRegistry([
      subPoolController({
        reconcile: async () => {
          calls++;
          return fail ? failed(ReconcileError.permanent("InvalidBudget", "cpu over envelope")) : done();
        },
      }),
    ]);

    const first = await runPass(ctx, registry, message);
    expect(first).toMatchObject({ result: "error", errorClass: "permanent", wroteStatus: true });
    expect(calls).toBe(1);
    const latched = kube.stored(SubPoolResource, { name: "demo" })!;
    expect(latched.status).toEqual({
      observedGeneration: 1,
      conditions: [
        {
          type: "InvalidSpec",
          status: "True",
          reason: "InvalidBudget",
          message: "cpu over envelope",
          observedGeneration: 1,
          lastTransitionTime: "2026-11-30T12:00:00Z",
        },
      ],
    });

    const second = await runPass(ctx, registry, message);
    expect(second).toMatchObject({ result: "latched", wroteStatus: false });
    expect(calls).toBe(1);
    expect(recorded.sent).toEqual([]);

    // A spec edit bumps the generation: the controller runs again and the latch is released.
    kube.seed(SubPoolResource, {
      ...latched,
      metadata: { ...latched.metadata, generation: 2, resourceVersion: undefined },
    });
    fail = false;
    const third = await runPass(ctx, registry, message);
    expect(third).toMatchObject({ result: "done", wroteStatus: true });
    expect(calls).toBe(2);
    const released = kube.stored(SubPoolResource, { name: "demo" })!.status as {
      conditions: { status: string; reason: string }[];
    };
    expect(released.conditions[0]).toMatchObject({
      status: "False",
      reason: "Resolved",
      observedGeneration: 2,
    });
  });

  it("never latches an object being deleted, so its finalizer still runs", async () => {
    const kube = new FakeKube();
    const object = subpool(3, {
      observedGeneration: 3,
      conditions: [{ type: "InvalidSpec", status: "True", reason: "X", message: "", observedGeneration: 3 }],
    });
    object.metadata.deletionTimestamp = "2026-11-30T11:59:00Z";
    kube.seed(SubPoolResource, object);
    const { ctx } = fakeContext(kube);
    let calls = 0;
    const registry = createRegistry([
      subPoolController({
        reconcile: async () => {
          calls++;
          return done();
        },
      }),
    ]);
    await runPass(ctx, registry, message);
    expect(calls).toBe(1);
  });

  it("controllers without an error policy latch nothing: the executor writes no condition", async () => {
    const { kube, ctx, registry } = setup(async () =>
      failed(ReconcileError.permanent("UnknownProvider", "nope")),
    );
    const result = await runPass(ctx, registry, proxyMessage());
    expect(result).toMatchObject({ errorClass: "permanent", wroteStatus: false });
    expect(kube.writes()).toBe(0);
  });
});
