import { describe, expect, it } from "vitest";
import { FakeKube, fakeContext } from "../../../test/support/fake-kube.ts";
import type { HealthState } from "../../health/state.ts";
import { encodeHealthState, HEALTH_ANNOTATION } from "../../health/stored-state.ts";
import { parseProbeAllowList } from "../../health/target.ts";
import { classifyError, ReconcileError } from "../../kube/classify.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import {
  createRegistry,
  type Outcome,
  type PassContext,
  type PassMessage,
  runPass,
} from "../../runtime/index.ts";
import { runController } from "../../runtime/pass/index.ts";
import { proxyFinalizer, proxyResource, proxySpecHashAnnotation } from "./api.ts";
import { proxySpecHash } from "./cloud-init.ts";
import { proxyController } from "./controller.ts";
import { proxyDriftReason } from "./drift.ts";
import { proxyHealthSubject } from "./health-subject.ts";
import {
  type CreateRequest,
  type Instance,
  nameFromUID,
  ownerTagKey,
  type Provider,
  ProviderError,
  ProviderNotFoundError,
  type Tag,
} from "./providers/provider.ts";

type Method = keyof Provider;

/** An in-memory provider keeping the contract: deterministic names, owner-tag adoption, NotFound. */
class FakeProvider implements Provider {
  readonly instances = new Map<string, Instance>();
  readonly calls: { method: Method; arg: unknown }[] = [];
  readonly failNext = new Map<Method, unknown[]>();
  /** "terminating": delete marks the instance Terminating until `finishDeletes()`. */
  deleteMode: "immediate" | "terminating" = "immediate";

  fail(method: Method, err: unknown): void {
    this.failNext.set(method, [...(this.failNext.get(method) ?? []), err]);
  }
  methods(): Method[] {
    return this.calls.map((c) => c.method);
  }
  put(instance: Instance): void {
    this.instances.set(instance.id, structuredClone(instance));
  }
  set(id: string, change: Partial<Instance>): void {
    const i = this.instances.get(id);
    if (!i) throw new Error(`no instance ${id}`);
    this.instances.set(id, { ...i, ...change });
  }
  finishDeletes(): void {
    for (const [id, i] of this.instances) if (i.state === "Terminating") this.instances.delete(id);
  }

  async create(req: CreateRequest): Promise<Instance> {
    this.record("create", req);
    const id = `fake://${req.namespace}/${req.name}`;
    const existing = this.instances.get(id);
    if (existing) {
      if (existing.tags[ownerTagKey] === req.tags[ownerTagKey]) return structuredClone(existing);
      throw new ProviderError("permanent", "NameConflict", `${req.name} is taken`);
    }
    const instance: Instance = { id, state: "Provisioning", tags: { ...req.tags } };
    this.instances.set(id, instance);
    this.created.push(req);
    return structuredClone(instance);
  }
  readonly created: CreateRequest[] = [];
  async get(id: string): Promise<Instance> {
    this.record("get", id);
    const i = this.instances.get(id);
    if (!i) throw new ProviderNotFoundError(id);
    return structuredClone(i);
  }
  async delete(id: string): Promise<void> {
    this.record("delete", id);
    const i = this.instances.get(id);
    if (!i) return;
    if (this.deleteMode === "immediate") this.instances.delete(id);
    else this.instances.set(id, { ...i, state: "Terminating" });
  }
  async listByTag(tag: Tag): Promise<Instance[]> {
    this.record("listByTag", tag);
    return [...this.instances.values()]
      .filter((i) => i.tags[tag.key] === tag.value)
      .map((i) => structuredClone(i));
  }

  private record(method: Method, arg: unknown): void {
    this.calls.push({ method, arg });
    const queued = this.failNext.get(method);
    if (queued && queued.length > 0) throw queued.shift();
  }
}

const uid = "3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6";
const instanceName = nameFromUID(uid);
const instanceId = `fake://ns1/${instanceName}`;
const key = { namespace: "ns1", name: "p1" };
const request = { controller: "proxy", ...key };
const message: PassMessage = { request, attempt: 0 };
const now = new Date("2026-11-30T12:00:00Z");

interface ProxyInit {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  finalizer?: boolean;
  annotations?: Record<string, string>;
  generation?: number;
  deleting?: boolean;
}

function proxyObject(init: ProxyInit = {}): KubeObject {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      ...key,
      uid,
      generation: init.generation ?? 1,
      ...(init.finalizer === false ? {} : { finalizers: [proxyFinalizer] }),
      ...(init.annotations ? { annotations: init.annotations } : {}),
      ...(init.deleting ? { deletionTimestamp: "2026-11-30T11:59:00Z" } : {}),
    },
    spec: init.spec ?? { mode: "Managed", provider: "fake" },
    ...(init.status ? { status: init.status } : {}),
  };
}

const hashOf = (userData?: string) => proxySpecHash({ provider: "fake" }, { userData });
const healthy = (instance: string, ok = true): HealthState => ({
  instance,
  verdict: ok,
  consecOK: ok ? 2 : 0,
  consecFail: ok ? 0 : 3,
  reported: { healthy: ok, latencyMs: 42, at: "2026-11-30T11:59:30.000Z" },
});
const healthCheck = {
  probeURL: "http://example.com/",
  expectedStatus: 200,
  intervalSeconds: 30,
  timeoutSeconds: 5,
  successThreshold: 2,
  failureThreshold: 3,
};

function world(
  init: ProxyInit = {},
  opts: { secrets?: Record<string, Record<string, string>>; probeAllowList?: string[] } = {},
) {
  const kube = new FakeKube();
  kube.seed(proxyResource, proxyObject(init));
  for (const [name, data] of Object.entries(opts.secrets ?? {})) {
    kube.seed(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace: "ns1" },
      data: Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, Buffer.from(v, "utf8").toString("base64")]),
      ),
    });
  }
  const provider = new FakeProvider();
  const allow = opts.probeAllowList ? parseProbeAllowList(opts.probeAllowList) : undefined;
  if (allow && !allow.ok) throw new Error("bad test allow-list");
  const def = proxyController({
    providers: { fake: provider },
    ...(allow?.ok ? { probeAllowList: allow.allowList } : {}),
  });
  const registry = createRegistry([def]);
  const { ctx, recorded } = fakeContext(kube, { now });
  const stored = () => kube.stored(proxyResource, key)!;
  /**
   * Runs the controller on a copy as the executor would (the runtime's finalizer, cleanup on
   * deletion, the outcome's metadata written), without the status write.
   */
  async function reconcile(): Promise<{ outcome: Outcome; object: KubeObject }> {
    const object = structuredClone(stored());
    const passCtx: PassContext = { ...ctx, request, attempt: 0 };
    const { outcome } = await runController(passCtx, def, object);
    return { outcome, object };
  }
  /** runPass until no immediate follow-up is left (at most `max` passes); delayed polls end it. */
  async function converge(max = 10): Promise<number> {
    for (let i = 1; i <= max; i++) {
      recorded.sent.length = 0;
      await runPass(ctx, registry, message);
      const next = recorded.sent[0];
      if (!next || (next.delaySeconds ?? 0) > 0) return i;
    }
    return max;
  }
  return { kube, provider, def, registry, ctx, recorded, stored, reconcile, converge };
}

const conditionsOf = (o: KubeObject) =>
  Object.fromEntries(
    (
      (o.status as { conditions?: { type: string; status: string; reason: string }[] } | undefined)
        ?.conditions ?? []
    ).map((c) => [c.type, `${c.status}/${c.reason}`]),
  );
/** As a pass at this generation left it: only what the drift decides on differs. */
const stamped = (o: KubeObject): KubeObject => ({
  ...o,
  status: { observedGeneration: o.metadata.generation, ip: "203.0.113.7" },
});
const outcomeOf = (o: Outcome) =>
  o.kind === "requeue"
    ? `requeue ${o.afterSeconds}`
    : o.kind === "error"
      ? `error ${classifyError(o.error).class}/${classifyError(o.error).reason}`
      : o.kind;

describe("proxy reconcile: one pass per branch", () => {
  it("has the runtime add the finalizer before any provider call, then creates in the same pass", async () => {
    const w = world({ finalizer: false });
    const create = w.provider.create.bind(w.provider);
    const heldAtCreate: unknown[] = [];
    w.provider.create = async (req) => {
      heldAtCreate.push(w.stored().metadata.finalizers);
      return create(req);
    };
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 5");
    expect(heldAtCreate).toEqual([[proxyFinalizer]]);
    expect(object.metadata.resourceVersion).toBe(w.stored().metadata.resourceVersion);
    expect(w.provider.methods()).toEqual(["create"]);
  });

  it("creates the instance named from the UID, records it and its spec hash, and polls", async () => {
    const w = world();
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 5");
    expect(w.provider.created).toEqual([
      {
        name: instanceName,
        namespace: "ns1",
        instance: {},
        tags: { [ownerTagKey]: uid, "crawl.kubefn.dev/managed-by": "kubefn" },
      },
    ]);
    expect(object.status).toMatchObject({ providerID: instanceId, phase: "Provisioning" });
    expect(conditionsOf(object)).toEqual({ Provisioned: "False/Provisioning" });
    expect(w.stored().metadata.annotations?.[proxySpecHashAnnotation]).toBe(await hashOf());
  });

  it.each<[string, Instance["state"], string | undefined, string, string]>([
    ["Provisioning → poll", "Provisioning", undefined, "requeue 5", "Provisioning"],
    ["Running → IP, Provisioned=True, drift poll", "Running", "10.1.2.3", "awaitSweep", "Ready"],
  ])("%s", async (_name, state, ip, expected, phase) => {
    const w = world({
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
      status: { providerID: instanceId },
    });
    w.provider.put({ id: instanceId, state, ...(ip ? { ip } : {}), tags: {} });
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe(expected);
    expect(object.status).toMatchObject({ phase, ...(ip ? { ip } : {}) });
    expect(w.provider.methods()).toEqual(["get"]);
    expect(w.kube.writes()).toBe(0);
  });

  it.each<[string, HealthState | undefined, string | undefined, string]>([
    ["healthy report → Ready", healthy(instanceId), "True/ProbeSucceeded", "Ready"],
    ["unhealthy report → Unhealthy", healthy(instanceId, false), "False/ProbeFailed", "Unhealthy"],
    [
      "refused target → Healthy=False/ProbeTargetRefused",
      {
        instance: instanceId,
        consecOK: 0,
        consecFail: 0,
        refused: { reason: "LinkLocal", message: "169.254.1.1 is link-local" },
      },
      "False/ProbeTargetRefused",
      "Unhealthy",
    ],
    [
      "state counted for another instance → no Healthy yet",
      healthy("fake://ns1/old"),
      undefined,
      "Provisioning",
    ],
  ])("Running with health: %s", async (_name, state, condition, phase) => {
    const w = world({
      spec: { mode: "Managed", provider: "fake", healthCheck },
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
      status: { providerID: instanceId, ...(state ? { health: encodeHealthState(state) } : {}) },
    });
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: {} });
    const { object } = await w.reconcile();
    expect(conditionsOf(object).Healthy).toBe(condition);
    expect(object.status).toMatchObject({ phase });
    if (condition === "True/ProbeSucceeded") {
      expect(object.status).toMatchObject({ latencyMillis: 42, lastHealthCheckTime: "2026-11-30T11:59:30Z" });
    }
  });

  it("replaces on a changed hash: deletes and polls, marked Replacing", async () => {
    const w = world({
      annotations: { [proxySpecHashAnnotation]: "v2:old" },
      status: { providerID: instanceId },
    });
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: {} });
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 5");
    expect(w.provider.methods()).toEqual(["get", "delete"]);
    expect(conditionsOf(object).Provisioned).toBe("False/Replacing");
    expect(object.status).toMatchObject({ phase: "Provisioning" });
  });

  it.each([
    ["replacement finished (hash changed, instance gone)", "v2:old"],
    ["instance vanished (hash unchanged)", undefined],
  ])("NotFound → forget the instance and requeue at once: %s", async (_name, stored) => {
    const w = world({
      annotations: { [proxySpecHashAnnotation]: stored ?? (await hashOf()) },
      status: { providerID: instanceId, ip: "10.1.2.3" },
    });
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 0");
    expect(object.status).not.toHaveProperty("providerID");
    expect(object.status).not.toHaveProperty("ip");
    expect(w.provider.methods()).toEqual(["get"]);
  });

  it.each([
    ["annotation missing", undefined],
    ["a hash the Go operator wrote", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
  ])("adopts the instance when the %s: writes the hash, creates nothing", async (_name, stored) => {
    const w = world({
      ...(stored ? { annotations: { [proxySpecHashAnnotation]: stored } } : {}),
      status: { providerID: instanceId },
    });
    const { outcome } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 0");
    expect(w.provider.calls).toEqual([]);
    expect(w.stored().metadata.annotations?.[proxySpecHashAnnotation]).toBe(await hashOf());
  });

  it.each<[Instance["state"], Method[]]>([
    ["Stopped", ["get", "delete"]],
    ["Terminating", ["get"]],
  ])("%s instance → delete (cattle) and poll", async (state, methods) => {
    const w = world({
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
      status: { providerID: instanceId },
    });
    w.provider.put({ id: instanceId, state, tags: {} });
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("requeue 5");
    expect(w.provider.methods()).toEqual(methods);
    expect(conditionsOf(object).Provisioned).toBe("False/Replacing");
  });

  it("quota → QuotaExceeded (the error policy) and a fixed 60 s retry; dropped by the next success", async () => {
    const w = world();
    w.provider.fail("create", new ProviderError("quota", "QuotaExceeded", "20/20 instances"));
    const first = await runPass(w.ctx, w.registry, message);
    expect(first).toMatchObject({ result: "error", errorClass: "quota", followUpSeconds: 60 });
    expect(w.recorded.sent.map((m) => [m.delaySeconds, m.messages[0]?.attempt])).toEqual([[60, 0]]);
    expect(conditionsOf(w.stored())).toEqual({
      QuotaExceeded: "True/QuotaExceeded",
      Ready: "False/QuotaExceeded",
    });
    expect(w.stored().status).toMatchObject({ phase: "Pending" });

    const second = await runPass(w.ctx, w.registry, message);
    expect(second).toMatchObject({ result: "requeue", followUpSeconds: 5 });
    expect(conditionsOf(w.stored())).not.toHaveProperty("QuotaExceeded");
  });

  it("a quota refusal waits for the provider's Retry-After when it is later than the quota retry", async () => {
    const w = world();
    w.provider.fail(
      "create",
      new ProviderError("quota", "QuotaExceeded", "later", { retryAfterSeconds: 90 }),
    );
    const result = await runPass(w.ctx, w.registry, message);
    expect(result).toMatchObject({ result: "error", errorClass: "quota", followUpSeconds: 90 });
  });

  it("permanent → Failed, latched: the same generation calls no provider; a new one retries", async () => {
    const w = world();
    w.provider.fail("create", new ProviderError("permanent", "Invalid", "machine type does not exist"));
    const first = await runPass(w.ctx, w.registry, message);
    expect(first).toMatchObject({ result: "error", errorClass: "permanent", errorReason: "Invalid" });
    expect(w.recorded.sent).toEqual([]);
    const failedObj = w.stored();
    expect(failedObj.status).toMatchObject({ phase: "Failed", observedGeneration: 1 });
    expect(conditionsOf(failedObj)).toEqual({
      PermanentError: "True/Invalid",
      Provisioned: "False/PermanentError",
      Ready: "False/Invalid",
      Stalled: "True/Invalid",
    });

    w.provider.calls.length = 0;
    const writes = w.kube.writes();
    const second = await runPass(w.ctx, w.registry, message);
    expect(second).toMatchObject({ result: "latched", wroteStatus: false });
    expect(w.provider.calls).toEqual([]);
    expect(w.kube.writes()).toBe(writes);

    w.kube.seed(proxyResource, {
      ...failedObj,
      metadata: { ...failedObj.metadata, generation: 2, resourceVersion: undefined },
    });
    await w.converge();
    expect(w.provider.methods()).toContain("create");
    expect(conditionsOf(w.stored())).not.toHaveProperty("PermanentError");
    expect(conditionsOf(w.stored())).not.toHaveProperty("Stalled");
    expect(conditionsOf(w.stored())).toMatchObject({
      Ready: "False/Provisioning",
      Reconciling: "True/Provisioning",
    });
    expect(w.stored().status).toMatchObject({
      phase: "Provisioning",
      providerID: instanceId,
      observedGeneration: 2,
    });
  });

  it("transient provider errors are returned for the executor's backoff, status untouched", async () => {
    const w = world({
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
      status: { providerID: instanceId },
    });
    w.provider.fail("get", new ProviderError("transient", "Unavailable", "503 from the cloud"));
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("error transient/Unavailable");
    expect(conditionsOf(object)).toEqual({});
  });

  it("unknown provider → Failed with UnknownProvider, no retry", async () => {
    const w = world({ spec: { mode: "Managed", provider: "azure" } });
    const { outcome } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("error permanent/UnknownProvider");
    const result = await runPass(w.ctx, w.registry, message);
    expect(result).toMatchObject({
      result: "error",
      errorClass: "permanent",
      errorReason: "UnknownProvider",
    });
    expect(w.recorded.sent).toEqual([]);
    expect(conditionsOf(w.stored())).toEqual({
      PermanentError: "True/UnknownProvider",
      Provisioned: "False/PermanentError",
      Ready: "False/UnknownProvider",
      Stalled: "True/UnknownProvider",
    });
    expect(w.stored().status).toMatchObject({ phase: "Failed" });
  });

  it("a permanent failure of the pass's own API calls is not the Proxy's: nothing latches", async () => {
    const w = world({ finalizer: false });
    w.kube.fail("patch", new ReconcileError("permanent", "Forbidden", "no RBAC"));
    const result = await runPass(w.ctx, w.registry, message);
    expect(result).toMatchObject({ result: "error", errorClass: "permanent" });
    expect(conditionsOf(w.stored())).not.toHaveProperty("PermanentError");
    // The finalizer write was refused: nothing is created without it.
    expect(w.provider.calls).toEqual([]);
  });

  it("a missing cloud-init Secret is a condition and a transient retry, not a crash", async () => {
    const w = world({
      spec: { mode: "Managed", provider: "fake", cloudInit: { secretRef: { name: "ci" } } },
    });
    const { outcome, object } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("error transient/CloudInitError");
    expect(conditionsOf(object)).toEqual({ Provisioned: "False/CloudInitError" });
    expect(object.status).toMatchObject({ phase: "Pending" });
    expect(w.provider.calls).toEqual([]);
    const result = await runPass(w.ctx, w.registry, message);
    expect(result).toMatchObject({
      result: "error",
      errorClass: "transient",
      followUpSeconds: expect.any(Number),
    });
  });

  it("hands the Secret's user data to the provider", async () => {
    const w = world(
      { spec: { mode: "Managed", provider: "fake", cloudInit: { secretRef: { name: "ci", key: "ud" } } } },
      { secrets: { ci: { ud: "#cloud-config\nruncmd: [echo hé]\n" } } },
    );
    await w.reconcile();
    expect(w.provider.created[0]?.cloudInit).toBe("#cloud-config\nruncmd: [echo hé]\n");
    expect(w.stored().metadata.annotations?.[proxySpecHashAnnotation]).toBe(
      await hashOf("#cloud-config\nruncmd: [echo hé]\n"),
    );
  });
  it("hands inline user data to the provider", async () => {
    const w = world({
      spec: { mode: "Managed", provider: "fake", cloudInit: { inline: "#cloud-config\n" } },
    });
    await w.reconcile();
    expect(w.provider.created[0]?.cloudInit).toBe("#cloud-config\n");
  });

  it("never hands over a ServiceAccount token Secret, whoever named it: Provisioned=False/CloudInitError, a Warning Event, no instance", async () => {
    const w = world({
      spec: {
        mode: "Managed",
        provider: "fake",
        cloudInit: { secretRef: { name: "robot-token", key: "token" } },
      },
    });
    w.kube.seed(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      type: "kubernetes.io/service-account-token",
      metadata: {
        name: "robot-token",
        namespace: "ns1",
        annotations: { "kubernetes.io/service-account.name": "robot" },
      },
      data: { token: btoa("eyJhbGciOi.robot") },
    });
    await w.converge();
    expect(w.provider.calls.filter((c) => c.method === "create")).toEqual([]);
    expect(conditionsOf(w.stored())).toEqual({
      Provisioned: "False/CloudInitError",
      Ready: "False/CloudInitError",
    });
    const provisioned = (w.stored().status as { conditions: { type: string; message: string }[] })
      .conditions[0];
    expect(provisioned?.message).toBe("cloud-init Secret ns1/robot-token is a ServiceAccount token");
    expect(w.stored().status).toMatchObject({ phase: "Pending" });
    const events = (await w.kube.list(Resources.Event)).items;
    expect(events).toEqual([expect.objectContaining({ type: "Warning", reason: "CloudInitError" })]);
    expect(JSON.stringify([w.stored(), events])).not.toContain("eyJhbGciOi");
  });
});

describe("proxy reconcile: deletion", () => {
  it("deletes the instance and polls until the provider says it is gone, then drops the finalizer", async () => {
    const w = world({ deleting: true, status: { providerID: instanceId } });
    w.provider.deleteMode = "terminating";
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: { [ownerTagKey]: uid } });
    const first = await w.reconcile();
    expect(outcomeOf(first.outcome)).toBe("requeue 5");
    expect(w.provider.methods()).toEqual(["get", "delete"]);
    expect(conditionsOf(first.object).Provisioned).toBe("False/Deleting");
    expect(first.object.status).toMatchObject({ phase: "Deleting" });
    expect(w.stored().metadata.finalizers).toEqual([proxyFinalizer]);

    const polling = await w.reconcile();
    expect(outcomeOf(polling.outcome)).toBe("requeue 5");
    expect(w.provider.methods()).toEqual(["get", "delete", "get"]);

    w.provider.finishDeletes();
    const last = await w.reconcile();
    expect(outcomeOf(last.outcome)).toBe("done");
    // The last finalizer of a deleting object gone, the API server (and FakeKube) deletes it.
    expect(w.stored()).toBeUndefined();
  });

  it("without a providerID, finds an orphan by its owner tag before letting go", async () => {
    const w = world({ deleting: true });
    w.provider.put({ id: instanceId, state: "Provisioning", tags: { [ownerTagKey]: uid } });
    w.provider.put({ id: "fake://ns1/px-other", state: "Running", tags: { [ownerTagKey]: "someone-else" } });
    const first = await w.reconcile();
    expect(outcomeOf(first.outcome)).toBe("requeue 5");
    expect(w.provider.calls.map((c) => `${c.method} ${JSON.stringify(c.arg)}`)).toEqual([
      `listByTag {"key":"${ownerTagKey}","value":"${uid}"}`,
      `delete "${instanceId}"`,
    ]);
    const last = await w.reconcile();
    expect(outcomeOf(last.outcome)).toBe("done");
    // The last finalizer of a deleting object gone, the API server (and FakeKube) deletes it.
    expect(w.stored()).toBeUndefined();
    expect(w.provider.instances.has("fake://ns1/px-other")).toBe(true);
  });

  it("without our finalizer there is nothing to do", async () => {
    const w = world({ deleting: true, finalizer: false });
    const { outcome } = await w.reconcile();
    expect(outcomeOf(outcome)).toBe("done");
    expect(w.kube.writes()).toBe(0);
    expect(w.provider.calls).toEqual([]);
  });
});

describe("proxy reconcile: External", () => {
  it("takes the IP from the endpoint, never calls a provider, never adds a finalizer", async () => {
    const w = world({
      finalizer: false,
      spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128 }, healthCheck },
      status: { health: encodeHealthState(healthy("203.0.113.7:3128")) },
    });
    const passes = await w.converge();
    expect(passes).toBe(1);
    const stored = w.stored();
    expect(stored.status).toMatchObject({ ip: "203.0.113.7", phase: "Ready", latencyMillis: 42 });
    expect(conditionsOf(stored)).toEqual({
      Provisioned: "True/ExternalEndpoint",
      Healthy: "True/ProbeSucceeded",
      Ready: "True/Healthy",
    });
    expect(stored.metadata.finalizers).toBeUndefined();
    expect(w.provider.calls).toEqual([]);
    expect(w.recorded.sent).toEqual([]);
  });
});

describe("proxy reconcile: an External endpoint on the internal network", () => {
  it.each([
    ["10.0.0.7", "PrivateAddress"],
    ["192.168.1.1", "PrivateAddress"],
    ["fd12::1", "PrivateAddress"],
    ["127.0.0.1", "Loopback"],
    ["localhost", "Loopback"],
    ["169.254.169.254", "MetadataAddress"],
    ["168.63.129.16", "MetadataAddress"],
    ["fd00:ec2::254", "MetadataAddress"],
  ])(
    "%s is refused before any probe: Failed with EndpointNotAllowed (%s) and a Warning Event, no IP",
    async (host, why) => {
      const w = world({
        finalizer: false,
        spec: { mode: "External", endpoint: { host, port: 3128 }, healthCheck },
      });
      await w.converge();
      const stored = w.stored();
      expect(conditionsOf(stored)).toMatchObject({
        PermanentError: "True/EndpointNotAllowed",
        Provisioned: "False/PermanentError",
      });
      expect(stored.status).toMatchObject({ phase: "Failed" });
      expect((stored.status as { ip?: string }).ip).toBeUndefined();
      const latch = (stored.status as { conditions: { type: string; message: string }[] }).conditions.find(
        (c) => c.type === "PermanentError",
      );
      expect(latch?.message).toContain(`spec.endpoint.host: probe target ${JSON.stringify(host)} is`);
      expect(why).toBeTruthy();
      const events = (await w.kube.list(Resources.Event)).items as { type?: string; reason?: string }[];
      expect(events).toContainEqual(
        expect.objectContaining({ type: "Warning", reason: "EndpointNotAllowed" }),
      );
    },
  );

  it("the operator's PROBE_ALLOWED_CIDRS admits it (a laptop's loopback proxy); never the metadata service", async () => {
    const allowed = world(
      { finalizer: false, spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128 } } },
      { probeAllowList: ["127.0.0.0/8"] },
    );
    await allowed.converge();
    expect(conditionsOf(allowed.stored())).toEqual({
      Provisioned: "True/ExternalEndpoint",
      Ready: "True/Provisioned",
    });
    const metadata = world(
      { finalizer: false, spec: { mode: "External", endpoint: { host: "169.254.169.254", port: 80 } } },
      { probeAllowList: ["169.254.0.0/16"] },
    );
    await metadata.converge();
    expect(conditionsOf(metadata.stored())).toMatchObject({ PermanentError: "True/EndpointNotAllowed" });
  });
});

describe("proxy reconcile: health a tenant cannot forge", () => {
  it("the tenant-writable health annotation claiming healthy is not probe history: no Healthy, no Ready", async () => {
    const w = world({
      finalizer: false,
      spec: { mode: "External", endpoint: { host: "203.0.113.7", port: 3128 }, healthCheck },
      annotations: { [HEALTH_ANNOTATION]: encodeHealthState(healthy("203.0.113.7:3128")) },
    });
    await w.converge();
    const stored = w.stored();
    expect((stored.status as { phase?: string }).phase).not.toBe("Ready");
    expect(conditionsOf(stored).Healthy ?? "absent").not.toMatch(/^True/);
  });
});

describe("attack: a tenant chooses what kubefn's identity runs (image, machine type, zone)", () => {
  it.each([
    ["an image of their own", { image: "evil.example/miner:1" }, "ImageNotAllowed"],
    ["a GPU machine type", { machineType: "a2-ultragpu-8g" }, "MachineTypeNotAllowed"],
    [
      "a machine type path of another zone",
      { machineType: "zones/us-east1-b/machineTypes/e2-micro" },
      "MachineTypeNotAllowed",
    ],
  ])(
    "%s: nothing is created; PermanentError, Provisioned=False, phase Failed, a Warning Event",
    async (_name, instance, reason) => {
      const w = world({ spec: { mode: "Managed", provider: "fake", instance } });
      await w.converge();
      expect(w.provider.calls.filter((c) => c.method === "create")).toEqual([]);
      expect(conditionsOf(w.stored())).toMatchObject({
        PermanentError: `True/${reason}`,
        Provisioned: "False/PermanentError",
      });
      expect(w.stored().status).toMatchObject({ phase: "Failed" });
      const events = (await w.kube.list(Resources.Event)).items;
      expect(events).toEqual(expect.arrayContaining([expect.objectContaining({ type: "Warning", reason })]));
    },
  );

  it("the operator's allow-list admits what it names (a trailing * matches by prefix); naming nothing is the provider's default", async () => {
    for (const instance of [{ image: "registry.example/proxy:2", machineType: "n2-standard-2" }, {}]) {
      const kube = new FakeKube();
      kube.seed(proxyResource, proxyObject({ spec: { mode: "Managed", provider: "fake", instance } }));
      const provider = new FakeProvider();
      const def = proxyController({
        providers: { fake: provider },
        instanceAllowList: { images: ["registry.example/*"], machineTypes: ["n2-standard-2"] },
      });
      const { ctx } = fakeContext(kube, { now });
      for (let i = 0; i < 3; i++) await runPass(ctx, createRegistry([def]), message);
      expect(provider.created).toHaveLength(1);
    }
  });

  it("a zone outside the operator's GCE_ZONES (where no drift list or orphan sweep looks): ZoneNotAllowed", async () => {
    const kube = new FakeKube();
    kube.seed(
      proxyResource,
      proxyObject({ spec: { mode: "Managed", provider: "fake", instance: { zone: "us-east1-b" } } }),
    );
    const provider = new FakeProvider();
    const def = proxyController({
      providers: { fake: provider },
      instanceAllowList: { images: [], machineTypes: [], zones: ["europe-west1-b"] },
    });
    const { ctx } = fakeContext(kube, { now });
    for (let i = 0; i < 3; i++) await runPass(ctx, createRegistry([def]), message);
    expect(provider.created).toEqual([]);
    expect(conditionsOf(kube.stored(proxyResource, key)!).PermanentError).toBe("True/ZoneNotAllowed");
  });

  it("an edit to a refused image keeps the running instance: no delete, no create", async () => {
    const w = world({
      spec: { mode: "Managed", provider: "fake", instance: { image: "evil.example/miner:1" } },
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
      status: { providerID: instanceId, ip: "10.1.2.3" },
    });
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: {} });
    await w.converge();
    expect(w.provider.methods().filter((m) => m === "create" || m === "delete")).toEqual([]);
    expect(w.provider.instances.has(instanceId)).toBe(true);
    expect(conditionsOf(w.stored()).PermanentError).toBe("True/ImageNotAllowed");
  });
});

describe("proxy reconcile: a probe timeout stored before the 30 s cap", () => {
  const slow = { ...healthCheck, intervalSeconds: 60, timeoutSeconds: 300 };
  const spec = { mode: "External", endpoint: { host: "203.0.113.7", port: 3128 }, healthCheck: slow };

  it("is parsed, probed with the cap and reported: ProbeTimeoutCapped=True/TimeoutOutOfRange and a Warning Event; the drift sees it until then", async () => {
    const w = world({ finalizer: false, spec });
    const shared = {
      instancesIn: async () => undefined,
      providers: new Set<string>(),
      desiredHash: async () => "",
    };
    expect(await proxyDriftReason(stamped(w.stored()), shared)).toBe("probe-timeout");
    await w.converge();
    const stored = w.stored();
    expect(conditionsOf(stored)).toMatchObject({ ProbeTimeoutCapped: "True/TimeoutOutOfRange" });
    const condition = (stored.status as { conditions: { type: string; message: string }[] }).conditions.find(
      (c) => c.type === "ProbeTimeoutCapped",
    );
    expect(condition?.message).toContain("probes give up after 30 s");
    expect(proxyHealthSubject(stored).probe.timeoutMs).toBe(30_000);
    const events = (await w.kube.list(Resources.Event)).items;
    expect(events).toEqual([expect.objectContaining({ type: "Warning", reason: "TimeoutOutOfRange" })]);
    expect(await proxyDriftReason(stored, shared)).toBeUndefined();
  });

  it("a timeout within the cap but above the interval is capped at the interval; a fixed spec drops the condition", async () => {
    const w = world({
      finalizer: false,
      spec: { ...spec, healthCheck: { ...slow, intervalSeconds: 10, timeoutSeconds: 20 } },
    });
    await w.converge();
    expect(proxyHealthSubject(w.stored()).probe.timeoutMs).toBe(10_000);
    expect(conditionsOf(w.stored())).toMatchObject({ ProbeTimeoutCapped: "True/TimeoutOutOfRange" });
    const fixed = w.stored();
    fixed.spec = { ...spec, healthCheck: { ...slow, timeoutSeconds: 5 } };
    fixed.metadata.generation = 2;
    w.kube.seed(proxyResource, fixed);
    await w.converge();
    expect(conditionsOf(w.stored()).ProbeTimeoutCapped).toBeUndefined();
  });
});

describe("proxy reconcile: Managed → External", () => {
  const external = { mode: "External", provider: "fake", endpoint: { host: "203.0.113.7", port: 3128 } };

  it("External never has a finalizer or a provider: the instance is deleted, then providerID, hash and finalizer go", async () => {
    const w = world({
      spec: external,
      status: { providerID: instanceId, ip: "10.1.2.3" },
      annotations: { [proxySpecHashAnnotation]: await hashOf() },
    });
    w.provider.deleteMode = "terminating";
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: { [ownerTagKey]: uid } });

    const first = await w.reconcile();
    expect(outcomeOf(first.outcome)).toBe("requeue 5");
    expect(w.provider.methods()).toEqual(["get", "delete"]);
    expect(first.object.status).toMatchObject({ ip: "203.0.113.7" });
    const provisioned = (
      first.object.status as { conditions: { type: string; message: string }[] }
    ).conditions.find((c) => c.type === "Provisioned");
    expect(provisioned?.message).toContain(`deleting the Managed instance ${instanceId}`);
    expect(w.stored().metadata.finalizers).toEqual([proxyFinalizer]);

    w.provider.finishDeletes();
    await w.converge();
    const stored = w.stored();
    expect(stored.metadata.finalizers ?? []).toEqual([]);
    expect(stored.metadata.annotations?.[proxySpecHashAnnotation]).toBeUndefined();
    expect(stored.status).not.toHaveProperty("providerID");
    expect(conditionsOf(stored).Provisioned).toBe("True/ExternalEndpoint");
    expect(w.provider.instances.size).toBe(0);

    w.provider.calls.length = 0;
    const writes = w.kube.writes();
    await w.converge();
    expect(w.provider.calls).toEqual([]);
    expect(w.kube.writes()).toBe(writes);
  });

  it("with spec.provider removed, the providerID's scheme names the provider", async () => {
    const w = world({
      spec: { mode: "External", endpoint: external.endpoint },
      status: { providerID: instanceId },
    });
    w.provider.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: { [ownerTagKey]: uid } });
    await w.converge(); // deletes, then polls after deletionPoll
    await w.converge();
    // Once the providerID names nothing of this Proxy's, the owner tag is asked too: a providerID
    // is tenant-writable and must not hide an instance.
    expect(w.provider.methods()).toEqual(["get", "delete", "get", "listByTag"]);
    expect(w.stored().metadata.finalizers ?? []).toEqual([]);
  });

  it("switching mode and provider in one edit deletes through the provider that made the instance", async () => {
    const kube = new FakeKube();
    kube.seed(
      proxyResource,
      proxyObject({
        spec: { ...external, provider: "other" },
        status: { providerID: instanceId },
      }),
    );
    const maker = new FakeProvider();
    const other = new FakeProvider();
    maker.put({ id: instanceId, state: "Running", ip: "10.1.2.3", tags: { [ownerTagKey]: uid } });
    const registry = createRegistry([proxyController({ providers: { fake: maker, other } })]);
    const { ctx } = fakeContext(kube, { now });
    await runPass(ctx, registry, message);
    await runPass(ctx, registry, message);
    // The lookup that finds nothing is followed by the owner-tag list (a providerID never hides one).
    expect(maker.methods()).toEqual(["get", "delete", "get", "listByTag"]);
    expect(other.calls).toEqual([]);
    expect(kube.stored(proxyResource, key)!.metadata.finalizers ?? []).toEqual([]);
  });

  it("without a providerID, an instance carrying the owner tag is still found and deleted", async () => {
    const w = world({ spec: external });
    w.provider.put({ id: instanceId, state: "Provisioning", tags: { [ownerTagKey]: uid } });
    await w.converge(); // deletes, then polls after deletionPoll
    await w.converge();
    expect(w.provider.methods()).toEqual(["listByTag", "delete", "listByTag"]);
    expect(w.provider.instances.size).toBe(0);
    expect(w.stored().metadata.finalizers ?? []).toEqual([]);
  });
});

describe("proxy reconcile: through the executor", () => {
  it("converges a new Proxy to Ready; then a steady-state pass writes nothing", async () => {
    const w = world({ finalizer: false });
    await w.converge();
    expect(w.stored().status).toMatchObject({ phase: "Provisioning", providerID: instanceId });
    w.provider.set(instanceId, { state: "Running", ip: "10.1.2.3" });
    await w.converge();
    expect(w.stored().status).toMatchObject({ phase: "Ready", ip: "10.1.2.3", observedGeneration: 1 });
    expect(w.provider.created).toHaveLength(1);

    const writes = w.kube.writes();
    w.recorded.sent.length = 0;
    const steady = await runPass(w.ctx, w.registry, message);
    // The drift poll equals the resync: the sweep's visit is the next pass, no follow-up is sent.
    expect(steady).toMatchObject({ result: "awaitSweep", wroteStatus: false });
    expect(steady.followUpSeconds).toBeUndefined();
    expect(w.recorded.sent).toHaveLength(0);
    expect(w.kube.writes()).toBe(writes);
  });

  it("rotating the cloud-init Secret replaces the instance (delete, poll until gone, recreate)", async () => {
    const w = world(
      { spec: { mode: "Managed", provider: "fake", cloudInit: { secretRef: { name: "ci" } } } },
      { secrets: { ci: { "user-data": "one" } } },
    );
    w.provider.deleteMode = "terminating";
    await w.converge();
    w.provider.set(instanceId, { state: "Running", ip: "10.1.2.3" });
    await w.converge();
    expect(w.stored().status).toMatchObject({ phase: "Ready" });

    const secret = w.kube.stored(Resources.Secret, { namespace: "ns1", name: "ci" })!;
    w.kube.seed(Resources.Secret, { ...secret, data: { "user-data": btoa("two") } });
    const [mapped] = await Promise.all(
      w.def.watches!.map((watch) =>
        watch.map(w.ctx, {
          resource: Resources.Secret,
          key: { namespace: "ns1", name: "ci" },
          verb: "update",
        }),
      ),
    );
    expect(mapped).toEqual([request]);

    await w.converge();
    expect(w.provider.instances.get(instanceId)?.state).toBe("Terminating");
    expect(conditionsOf(w.stored()).Provisioned).toBe("False/Replacing");
    await w.converge(); // still terminating: poll again, nothing created
    expect(w.provider.created).toHaveLength(1);

    w.provider.finishDeletes();
    await w.converge();
    expect(w.provider.created.map((c) => c.cloudInit)).toEqual(["one", "two"]);
    expect(w.stored().metadata.annotations?.[proxySpecHashAnnotation]).toBe(await hashOf("two"));
    expect(w.stored().status).toMatchObject({ phase: "Provisioning", providerID: instanceId });
  });

  it("two passes at once for a new Proxy leave one instance", async () => {
    const w = world();
    await Promise.all([runPass(w.ctx, w.registry, message), runPass(w.ctx, w.registry, message)]);
    await w.converge();
    expect(w.provider.instances.size).toBe(1);
    expect(w.provider.created).toHaveLength(1);
    expect(w.stored().status).toMatchObject({ providerID: instanceId });
  });
});

describe("Secret watch", () => {
  it("maps a Secret to the Proxies in its namespace that reference it", async () => {
    const w = world({
      spec: { mode: "Managed", provider: "fake", cloudInit: { secretRef: { name: "ci" } } },
    });
    const other = (name: string, namespace: string, secret: string): KubeObject => ({
      ...proxyObject({
        spec: { mode: "Managed", provider: "fake", cloudInit: { secretRef: { name: secret } } },
      }),
      metadata: { name, namespace, uid: `${name}-uid` },
    });
    w.kube.seed(proxyResource, other("p2", "ns1", "ci"));
    w.kube.seed(proxyResource, other("p3", "ns1", "other"));
    w.kube.seed(proxyResource, other("p4", "ns2", "ci"));
    const watch = w.def.watches![0]!;
    expect(watch.resource).toMatchObject({ resource: "secrets", group: "" });
    const requests = await watch.map(w.ctx, {
      resource: Resources.Secret,
      key: { namespace: "ns1", name: "ci" },
      verb: "update",
    });
    expect(requests).toEqual([request, { controller: "proxy", namespace: "ns1", name: "p2" }]);
  });
});
