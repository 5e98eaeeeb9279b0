import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import { ConflictError, InvalidError, NotFoundError } from "../../kube/errors.ts";
import type { KubeObject, Resource } from "../../kube/port.ts";
import type { PassMessage } from "../core/index.ts";
import {
  type ControllerDefinition,
  createdReason,
  createRegistry,
  done,
  type FinalizerWish,
  type Outcome,
  RegistryError,
  requeueAfter,
} from "../definition/index.ts";
import { runPass } from "./executor.ts";
import { finalizerDrift, finalizerStep } from "./finalize.ts";
import { stoppedController } from "./stopped.ts";

const Widget: Resource = {
  group: "toy.example.com",
  version: "v1",
  resource: "widgets",
  kind: "Widget",
  namespaced: true,
};
const own = "toy.example.com/finalizer";
const foreign = "tenant.example.com/hold";
const key = { namespace: "ns1", name: "w1" };
const message: PassMessage = { request: { controller: "widget", ...key }, attempt: 0 };

function widget(
  metadata: Partial<KubeObject["metadata"]> = {},
  spec: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: "toy.example.com/v1",
    kind: "Widget",
    metadata: { ...key, uid: "uid-w1", generation: 1, ...metadata },
    spec,
  };
}

/**
 * A toy controller whose finalizer the runtime keeps: it records what reconcile and cleanup saw
 * (the finalizers stored at that moment), and cleanup answers from `cleanupAnswers` in turn.
 */
function world(object: KubeObject, opts: { cleanupAnswers?: Outcome[] } = {}) {
  const kube = new FakeKube();
  kube.seed(Widget, object);
  const { ctx, recorded } = fakeContext(kube);
  const seen: { call: "reconcile" | "cleanup"; stored: string[] | undefined }[] = [];
  const answers = [...(opts.cleanupAnswers ?? [])];
  const storedFinalizers = () => kube.stored(Widget, key)?.metadata.finalizers;
  const def: ControllerDefinition = {
    name: "widget",
    for: Widget,
    conditionTypes: ["Ready"],
    resyncSeconds: 600,
    observedGeneration: false,
    finalizer: {
      name: own,
      want: (o) => (o.spec as { want?: FinalizerWish } | undefined)?.want ?? "hold",
      cleanup: async () => {
        seen.push({ call: "cleanup", stored: storedFinalizers() });
        return answers.shift() ?? done();
      },
    },
    reconcile: async () => {
      seen.push({ call: "reconcile", stored: storedFinalizers() });
      return done();
    },
  };
  const registry = createRegistry([def]);
  const pass = () => runPass(ctx, registry, message);
  return { kube, ctx, def, recorded, seen, pass, stored: () => kube.stored(Widget, key) };
}

describe("the runtime's finalizer", () => {
  it("is added before the first reconcile, which runs in the same pass on the written version", async () => {
    const w = world(widget());
    const result = await w.pass();
    expect(result.result).toBe("done");
    expect(w.seen).toEqual([{ call: "reconcile", stored: [own] }]);
    expect(w.stored()?.metadata.finalizers).toEqual([own]);
    // One guarded metadata patch: the finalizer list and the resourceVersion read.
    const patches = w.kube.calls.filter((c) => c.method === "patch");
    expect(patches).toHaveLength(1);
    expect(patches[0]?.body).toMatchObject({
      body: { metadata: { finalizers: [own], resourceVersion: expect.any(String) } },
    });
  });

  it("keeps foreign finalizers where they are when adding and removing its own", async () => {
    const w = world(widget({ finalizers: [foreign] }));
    await w.pass();
    expect(w.stored()?.metadata.finalizers).toEqual([foreign, own]);
    await w.kube.delete(Widget, key);
    await w.pass();
    expect(w.seen.map((s) => s.call)).toEqual(["reconcile", "cleanup"]);
    // The tenant's hold keeps the object; only ours went.
    expect(w.stored()?.metadata.finalizers).toEqual([foreign]);
  });

  it("runs cleanup, never reconcile, on deletion, and removes the finalizer only once cleanup is done", async () => {
    const w = world(widget({ finalizers: [own] }), {
      cleanupAnswers: [requeueAfter(5), requeueAfter(5), done()],
    });
    await w.kube.delete(Widget, key);
    const first = await w.pass();
    expect(first.followUpSeconds).toBe(5);
    expect(w.stored()?.metadata.finalizers).toEqual([own]);
    await w.pass();
    expect(w.stored()?.metadata.finalizers).toEqual([own]);
    const last = await w.pass();
    expect(last.result).toBe("done");
    expect(w.seen.map((s) => s.call)).toEqual(["cleanup", "cleanup", "cleanup"]);
    // Its last finalizer gone, the API server deletes the object; nothing is written after it.
    expect(w.stored()).toBeUndefined();
    expect(w.kube.calls.filter((c) => c.method === "patchStatus")).toEqual([]);
  });

  it("is never added to an object being deleted, nor touches one that does not hold it", async () => {
    const w = world(widget({ finalizers: [foreign], deletionTimestamp: "2026-11-30T11:59:00Z" }));
    const result = await w.pass();
    expect(result.result).toBe("done");
    expect(w.seen).toEqual([]);
    expect(w.kube.writes()).toBe(0);
    expect(w.stored()?.metadata.finalizers).toEqual([foreign]);
  });

  it("a refused write (Conflict) calls neither reconcile nor cleanup and requeues at once", async () => {
    const w = world(widget());
    w.kube.fail(
      "patch",
      new ConflictError("the object has been modified", { status: 409, reason: "Conflict" }),
    );
    const result = await w.pass();
    expect(result).toMatchObject({ result: "error", errorClass: "conflict", followUpSeconds: 0 });
    expect(w.seen).toEqual([]);
    expect(w.stored()?.metadata.finalizers).toBeUndefined();
  });

  it("an object that releases it: cleanup first, the finalizer removed once done, then reconcile", async () => {
    const w = world(widget({ finalizers: [foreign, own] }, { want: "release" }), {
      cleanupAnswers: [requeueAfter(5), done()],
    });
    await w.pass();
    expect(w.seen.map((s) => s.call)).toEqual(["cleanup"]);
    expect(w.stored()?.metadata.finalizers).toEqual([foreign, own]);
    await w.pass();
    expect(w.seen).toEqual([
      { call: "cleanup", stored: [foreign, own] },
      { call: "cleanup", stored: [foreign, own] },
      { call: "reconcile", stored: [foreign] },
    ]);
  });

  it("a stopped operator (refused at start) leaves the finalizer of an object being deleted as it is", async () => {
    const w = world(widget({ finalizers: [own] }));
    await w.kube.delete(Widget, key);
    const registry = createRegistry([stoppedController(w.def, ["a bad setting"])]);
    const result = await runPass(w.ctx, registry, message);
    expect(result).toMatchObject({ result: "error", errorClass: "permanent" });
    expect(w.seen).toEqual([]);
    expect(w.stored()?.metadata.finalizers).toEqual([own]);
  });

  it("as-is: an object that neither holds nor releases is reconciled with its finalizers untouched", async () => {
    for (const finalizers of [undefined, [own]]) {
      const w = world(widget(finalizers ? { finalizers } : {}, { want: "as-is" }));
      await w.pass();
      expect(w.seen.map((s) => s.call)).toEqual(["reconcile"]);
      expect(w.kube.writes()).toBe(0);
    }
  });

  it("writes the metadata an Outcome carries once, guarded, and not again while it holds", async () => {
    const kube = new FakeKube();
    kube.seed(Widget, widget({ finalizers: [own], annotations: { keep: "me" } }));
    const { ctx } = fakeContext(kube);
    const registry = createRegistry([
      {
        name: "widget",
        for: Widget,
        conditionTypes: [],
        resyncSeconds: 600,
        observedGeneration: false,
        finalizer: { name: own, cleanup: async () => done() },
        reconcile: async () =>
          done().withMetadata({ annotations: { "toy.example.com/hash": "h1", gone: null } }),
      },
    ]);
    await runPass(ctx, registry, message);
    expect(kube.stored(Widget, key)?.metadata.annotations).toEqual({
      keep: "me",
      "toy.example.com/hash": "h1",
    });
    const writes = kube.writes();
    await runPass(ctx, registry, message);
    expect(kube.writes()).toBe(writes);
  });
});

describe("finalizerStep and finalizerDrift", () => {
  const def = world(widget()).def;
  it.each<[string, Partial<KubeObject["metadata"]>, Record<string, unknown>, string, string | undefined]>([
    ["live, wants it, missing", {}, {}, "add", "finalizer"],
    ["live, holds it", { finalizers: [own] }, {}, "reconcile", undefined],
    ["live, releases, holds it", { finalizers: [own] }, { want: "release" }, "release", "finalizer"],
    ["live, releases, not held", {}, { want: "release" }, "reconcile", undefined],
    ["live, as-is, missing", {}, { want: "as-is" }, "reconcile", undefined],
    ["deleting, held", { finalizers: [own], deletionTimestamp: "t" }, {}, "cleanup", undefined],
    ["deleting, not held", { finalizers: [foreign], deletionTimestamp: "t" }, {}, "skip", undefined],
  ])("%s → %s (drift %s)", (_, metadata, spec, step, drift) => {
    const object = widget(metadata, spec);
    expect(finalizerStep(def.finalizer, object)).toBe(step);
    expect(finalizerDrift(def, object)).toBe(drift);
  });

  it("a controller without a finalizer only reconciles", () => {
    expect(finalizerStep(undefined, widget({ deletionTimestamp: "t" }))).toBe("reconcile");
  });

  it("the registry refuses a finalizer name that is not domain-qualified", () => {
    expect(() =>
      createRegistry([{ ...def, finalizer: { name: "finalizer", cleanup: async () => done() } }]),
    ).toThrow(RegistryError);
  });
});

describe("regression (issue 33): the finalizer of a new object, added without a read first", () => {
  /**
   * `world`, its finalizer declared `addUnread`, and its FakeKube answering the JSON patch the
   * runtime sends as the API server does (FakeKube has no JSON patch): each `test` against the
   * stored object, a missing member equal to `null`, then the `add` as a merge patch.
   */
  function unreadWorld(object: KubeObject) {
    const w = world(object);
    w.def.finalizer = { ...w.def.finalizer!, addUnread: true };
    const merge = w.kube.patch.bind(w.kube);
    w.kube.patch = async (res, key, patch) => {
      if (patch.type !== "json") return merge(res, key, patch);
      w.kube.calls.push({ method: "patch", resource: res.resource, key, body: patch });
      const stored = w.kube.stored(res, key);
      if (!stored) throw new NotFoundError("not found", { status: 404, reason: "NotFound" });
      const body: Record<string, unknown> = {};
      for (const op of patch.ops) {
        const field = op.path.replace("/metadata/", "") as keyof KubeObject["metadata"];
        if (op.op === "test" && (stored.metadata[field] ?? null) !== op.value)
          throw new InvalidError(`testing value ${op.path} failed`, { status: 422, reason: "Invalid" });
        if (op.op === "add") body[field] = op.value;
      }
      return merge(res, key, { type: "merge", body: { metadata: body } });
    };
    const created = (uid: string): PassMessage => ({
      ...message,
      uid,
      trigger: { kind: "audit", reason: createdReason },
    });
    const reads = () => w.kube.calls.filter((c) => c.method === "get");
    return { ...w, created, reads };
  }

  it("the pass a creation brought adds it with one guarded patch, whose answer reconcile works on: no read", async () => {
    const w = unreadWorld(widget());
    const result = await runPass(w.ctx, createRegistry([w.def]), w.created("uid-w1"));
    expect(result.result).toBe("done");
    expect(w.reads()).toEqual([]);
    expect(w.seen).toEqual([{ call: "reconcile", stored: [own] }]);
    const patch = w.kube.calls.find((c) => c.method === "patch")?.body as { ops: unknown[] };
    expect(patch.ops).toEqual([
      { op: "test", path: "/metadata/uid", value: "uid-w1" },
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "test", path: "/metadata/deletionTimestamp", value: null },
      { op: "add", path: "/metadata/finalizers", value: [own] },
    ]);
  });

  it.each([
    ["another object of the name (the event's UID is not this one's)", widget(), "uid-other"],
    ["an object holding a finalizer already", widget({ finalizers: [foreign] }), "uid-w1"],
  ])("where a test fails — %s — the pass reads the object as every other does", async (_, object, uid) => {
    const w = unreadWorld(object);
    await runPass(w.ctx, createRegistry([w.def]), w.created(uid));
    expect(w.reads()).toHaveLength(1);
    // Another UID: the message was for an earlier object; nothing is written to this one.
    if (uid === "uid-other") expect(w.stored()?.metadata.finalizers).toBeUndefined();
    else expect(w.stored()?.metadata.finalizers).toEqual([foreign, own]);
  });

  it("so does the sweep's pass for an object it listed without the finalizer (under load it may come first)", async () => {
    const w = unreadWorld(widget());
    await runPass(w.ctx, createRegistry([w.def]), {
      ...message,
      uid: "uid-w1",
      trigger: { kind: "drift", reason: "finalizer" },
    });
    expect(w.reads()).toEqual([]);
    expect(w.stored()?.metadata.finalizers).toEqual([own]);
  });

  it("a finalizer the object does not want is taken off again at once", async () => {
    const w = unreadWorld(widget({}, { want: "as-is" }));
    await runPass(w.ctx, createRegistry([w.def]), w.created("uid-w1"));
    expect(w.stored()?.metadata.finalizers ?? []).toEqual([]);
    expect(w.seen.map((s) => [s.call, s.stored ?? []])).toEqual([["reconcile", []]]);
  });

  it.each([
    ["another trigger", { ...message, uid: "uid-w1", trigger: { kind: "audit" as const } }],
    [
      "another drift",
      { ...message, uid: "uid-w1", trigger: { kind: "drift" as const, reason: "generation" } },
    ],
    ["no UID", { ...message, trigger: { kind: "audit" as const, reason: createdReason } }],
    [
      "a retry",
      { ...message, uid: "uid-w1", attempt: 1, trigger: { kind: "audit" as const, reason: createdReason } },
    ],
  ])("with %s the pass reads first", async (_, m) => {
    const w = unreadWorld(widget());
    await runPass(w.ctx, createRegistry([w.def]), m);
    expect(w.reads()).toHaveLength(1);
    expect(
      w.kube.calls.some((c) => c.method === "patch" && (c.body as { type?: string }).type === "json"),
    ).toBe(false);
  });
});
