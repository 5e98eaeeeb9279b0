import { describe, expect, it } from "vitest";
import type { HealthProjection } from "../../health/state.ts";
import type { Condition } from "../../kube/conditions.ts";
import type { ProxyStatus } from "./api.ts";
import { proxySpecHash, specHashPrefix } from "./cloud-init.ts";
import { type DeletionObservation, decideDeletion } from "./delete.ts";
import { healthInstanceOf, proxyHealthSubject } from "./health-subject.ts";
import { decideManaged, type ManagedObservation } from "./managed.ts";
import type { Instance } from "./providers/provider.ts";
import { applyHealth, computePhase } from "./status.ts";

const now = new Date("2026-11-30T12:00:00Z");
const inst = (state: Instance["state"], ip?: string): Instance => ({
  id: "fake://ns/px-1",
  state,
  ...(ip ? { ip } : {}),
  tags: {},
});
const H = "v2:aaaa";
const base: ManagedObservation = {
  providerKnown: true,
  providerID: "fake://ns/px-1",
  storedHash: H,
  desiredHash: H,
};

describe("decideManaged", () => {
  it.each<[string, Partial<ManagedObservation>, string, Record<string, unknown>?]>([
    ["unknown provider", { providerKnown: false }, "unknownProvider"],
    ["cloud-init not resolved yet", { desiredHash: undefined }, "resolve"],
    ["no providerID → create", { providerID: undefined }, "create"],
    [
      "no providerID, old hash → create (it writes the hash)",
      { providerID: undefined, storedHash: "v2:old" },
      "create",
    ],
    ["providerID without annotation → adopt", { storedHash: undefined }, "adopt"],
    ["providerID with a foreign (Go operator) hash → adopt", { storedHash: "3f2a9c" }, "adopt"],
    ["hash matches → look up to observe", {}, "lookup", { purpose: "observe" }],
    ["hash differs → look up to replace", { storedHash: "v2:old" }, "lookup", { purpose: "replace" }],
    ["observe: gone → forget", { lookup: { found: false } }, "forget", { purpose: "observe" }],
    [
      "replace: gone → forget",
      { storedHash: "v2:old", lookup: { found: false } },
      "forget",
      { purpose: "replace" },
    ],
    [
      "replace: exists → delete",
      { storedHash: "v2:old", lookup: { found: true, instance: inst("Running", "10.0.0.1") } },
      "replace",
      { callDelete: true },
    ],
    [
      "replace: already terminating → only poll",
      { storedHash: "v2:old", lookup: { found: true, instance: inst("Terminating") } },
      "replace",
      { callDelete: false },
    ],
    ["Provisioning → poll", { lookup: { found: true, instance: inst("Provisioning") } }, "poll"],
    ["Running without an address yet → poll", { lookup: { found: true, instance: inst("Running") } }, "poll"],
    [
      "Running with an address → running",
      { lookup: { found: true, instance: inst("Running", "10.0.0.1") } },
      "running",
    ],
    [
      "Stopped → delete (cattle)",
      { lookup: { found: true, instance: inst("Stopped") } },
      "deleteDead",
      { callDelete: true },
    ],
    [
      "Terminating → poll the deletion",
      { lookup: { found: true, instance: inst("Terminating") } },
      "deleteDead",
      { callDelete: false },
    ],
  ])("%s", (_name, change, kind, fields) => {
    const action = decideManaged({ ...base, ...change });
    expect(action.kind).toBe(kind);
    if (fields) expect(action).toMatchObject(fields);
  });
});

describe("decideDeletion", () => {
  const del: DeletionObservation = { providerKnown: true, providerID: "fake://ns/px-1" };
  it.each<[string, Partial<DeletionObservation>, string]>([
    ["unknown provider → nothing to reach: the finalizer may go", { providerKnown: false }, "gone"],
    ["providerID → look up", {}, "lookup"],
    // A providerID naming nothing of this Proxy's (gone, or forged) must not hide a tagged instance.
    ["providerID names nothing of ours → list by owner tag", { lookup: { found: false } }, "listTagged"],
    ["…and nothing tagged → the finalizer may go", { lookup: { found: false }, tagged: [] }, "gone"],
    [
      "…and a tagged instance → delete it",
      { lookup: { found: false }, tagged: [inst("Running")] },
      "deleteInstances",
    ],
    [
      "instance exists → delete and poll",
      { lookup: { found: true, instance: inst("Running") } },
      "deleteInstances",
    ],
    ["no providerID → list by owner tag", { providerID: undefined }, "listTagged"],
    ["no providerID, nothing tagged → the finalizer may go", { providerID: undefined, tagged: [] }, "gone"],
    [
      "no providerID, a tagged orphan → delete it",
      { providerID: undefined, tagged: [inst("Provisioning")] },
      "deleteInstances",
    ],
  ])("%s", (_name, change, kind) => {
    expect(decideDeletion({ ...del, ...change }).kind).toBe(kind);
  });
});

const cond = (
  type: string,
  status: Condition["status"],
  reason: string,
  observedGeneration?: number,
): Condition => ({
  type,
  status,
  reason,
  message: "",
  lastTransitionTime: "2026-11-30T11:00:00Z",
  ...(observedGeneration === undefined ? {} : { observedGeneration }),
});

describe("computePhase", () => {
  it.each<
    [string, ProxyStatus, { deleting?: boolean; generation?: number; healthChecked?: boolean }, string]
  >([
    ["nothing yet", {}, {}, "Pending"],
    [
      "deleting wins",
      { conditions: [cond("Provisioned", "True", "Created")] },
      { deleting: true },
      "Deleting",
    ],
    [
      "latched at this generation",
      { conditions: [cond("PermanentError", "True", "Invalid", 1)] },
      {},
      "Failed",
    ],
    [
      "latch from an older generation",
      { conditions: [cond("PermanentError", "True", "Invalid", 1)] },
      { generation: 2 },
      "Pending",
    ],
    ["instance recorded", { providerID: "x" }, {}, "Provisioning"],
    ["replacing", { conditions: [cond("Provisioned", "False", "Replacing")] }, {}, "Provisioning"],
    [
      "cloud-init missing",
      { providerID: "x", conditions: [cond("Provisioned", "False", "CloudInitError")] },
      {},
      "Pending",
    ],
    ["provisioned, no health check", { conditions: [cond("Provisioned", "True", "Created")] }, {}, "Ready"],
    [
      "provisioned, health check not yet passed",
      { conditions: [cond("Provisioned", "True", "Created")] },
      { healthChecked: true },
      "Provisioning",
    ],
    [
      "provisioned and healthy",
      { conditions: [cond("Provisioned", "True", "Created"), cond("Healthy", "True", "ProbeSucceeded")] },
      {},
      "Ready",
    ],
    [
      "provisioned and unhealthy",
      { conditions: [cond("Provisioned", "True", "Created"), cond("Healthy", "False", "ProbeFailed")] },
      {},
      "Unhealthy",
    ],
  ])("%s → %s", (_name, status, o, phase) => {
    const opts = {
      deleting: o.deleting ?? false,
      generation: o.generation ?? 1,
      healthChecked: o.healthChecked,
    };
    expect(computePhase(status, opts)).toBe(phase);
  });
});

describe("applyHealth", () => {
  const healthy = (s: ProxyStatus) => s.conditions?.find((c) => c.type === "Healthy");
  it.each<[string, HealthProjection, boolean, Partial<Condition> | undefined, Partial<ProxyStatus>]>([
    [
      "reported healthy",
      { kind: "Reported", healthy: true, latencyMs: 12.4, at: "2026-11-30T11:59:30.250Z" },
      true,
      { status: "True", reason: "ProbeSucceeded" },
      { latencyMillis: 12, lastHealthCheckTime: "2026-11-30T11:59:30Z" },
    ],
    [
      "reported unhealthy",
      { kind: "Reported", healthy: false, latencyMs: 5000 },
      true,
      { status: "False", reason: "ProbeFailed" },
      { latencyMillis: 5000 },
    ],
    [
      "refused target",
      { kind: "Refused", reason: "MetadataAddress", message: "169.254.169.254 is a metadata address" },
      true,
      {
        status: "False",
        reason: "ProbeTargetRefused",
        message: "MetadataAddress: 169.254.169.254 is a metadata address",
      },
      {},
    ],
    ["unknown leaves it alone", { kind: "Unknown" }, true, undefined, {}],
    ["no healthCheck removes it", { kind: "Reported", healthy: true }, false, undefined, {}],
  ])("%s", (_name, projection, configured, condition, fields) => {
    const status: ProxyStatus = {};
    applyHealth(status, projection, configured, { now, generation: 4 });
    if (condition) expect(healthy(status)).toMatchObject({ ...condition, observedGeneration: 4 });
    else expect(healthy(status)).toBeUndefined();
    expect(status).toMatchObject(fields);
  });

  it("keeps lastTransitionTime when only the latency moves", () => {
    const status: ProxyStatus = { conditions: [cond("Healthy", "True", "ProbeSucceeded")] };
    status.conditions![0]!.message = "probes through the proxy succeed";
    applyHealth(status, { kind: "Reported", healthy: true, latencyMs: 80 }, true, { now, generation: 2 });
    expect(healthy(status)?.lastTransitionTime).toBe("2026-11-30T11:00:00Z");
    expect(status.latencyMillis).toBe(80);
  });

  it("drops latency and time with the healthCheck", () => {
    const status: ProxyStatus = {
      latencyMillis: 3,
      lastHealthCheckTime: "2026-11-30T11:00:00Z",
      conditions: [cond("Healthy", "True", "ProbeSucceeded")],
    };
    applyHealth(status, { kind: "Unknown" }, false, { now, generation: 2 });
    expect(status).toEqual({});
  });
});

describe("proxySpecHash", () => {
  const spec = { provider: "gce", instance: { machineType: "e2-small", labels: { a: "1", b: "2" } } };
  it("is versioned, stable under key order, and covers the resolved cloud-init", async () => {
    const h = await proxySpecHash(spec, { userData: "#cloud-config\n" });
    expect(h.startsWith(specHashPrefix)).toBe(true);
    expect(
      await proxySpecHash(
        { instance: { labels: { b: "2", a: "1" }, machineType: "e2-small" }, provider: "gce" },
        { userData: "#cloud-config\n" },
      ),
    ).toBe(h);
    expect(await proxySpecHash(spec, { userData: "#cloud-config\nrotated\n" })).not.toBe(h);
    expect(
      await proxySpecHash({ ...spec, provider: "kubernetes" }, { userData: "#cloud-config\n" }),
    ).not.toBe(h);
  });

  it("ignores healthCheck, mode and endpoint: editing a probe never replaces an instance", async () => {
    const withProbe = { ...spec, mode: "Managed", healthCheck: { probeURL: "http://example.com/" } };
    expect(await proxySpecHash(withProbe, { userData: undefined })).toBe(
      await proxySpecHash(spec, { userData: undefined }),
    );
  });
});

describe("proxyHealthSubject", () => {
  const proxy = (spec: Record<string, unknown>, status: Record<string, unknown> = {}, deleting = false) => ({
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: {
      name: "p1",
      namespace: "ns1",
      resourceVersion: "7",
      ...(deleting ? { deletionTimestamp: "2026-11-30T11:00:00Z" } : {}),
    },
    spec,
    status,
  });
  const hc = {
    probeURL: "https://example.com/",
    expectedStatus: 204,
    intervalSeconds: 60,
    timeoutSeconds: 3,
    successThreshold: 2,
    failureThreshold: 4,
  };

  it("probes a Running Managed proxy at its IP, keyed by providerID, seeded from Healthy", () => {
    const s = proxyHealthSubject(
      proxy(
        { mode: "Managed", provider: "kubernetes", healthCheck: hc },
        {
          providerID: "kubernetes://ns1/px-1",
          ip: "127.1.0.5",
          latencyMillis: 9,
          conditions: [cond("Healthy", "True", "ProbeSucceeded")],
        },
      ),
    );
    expect(s).toMatchObject({
      key: { namespace: "ns1", name: "p1" },
      resourceVersion: "7",
      deleting: false,
      instance: "kubernetes://ns1/px-1",
      proxy: { host: "127.1.0.5", port: 3128, scheme: "http" },
      probe: { url: "https://example.com/", expectedStatus: 204, timeoutMs: 3000, intervalSeconds: 60 },
      thresholds: { successThreshold: 2, failureThreshold: 4, minReportIntervalSeconds: 60 },
      seed: { healthy: true, latencyMs: 9 },
    });
  });

  it("probes an External proxy at its endpoint, keyed host:port", () => {
    const p = proxy({
      mode: "External",
      endpoint: { host: "10.0.0.9", port: 8080, scheme: "http" },
      healthCheck: hc,
    });
    expect(proxyHealthSubject(p)).toMatchObject({
      instance: "10.0.0.9:8080",
      proxy: { host: "10.0.0.9", port: 8080 },
    });
    expect(healthInstanceOf({ spec: p.spec as never, status: {} })).toBe("10.0.0.9:8080");
  });

  it.each([
    ["no healthCheck", proxy({ mode: "Managed", provider: "k" }, { providerID: "x", ip: "1.2.3.4" })],
    ["no address yet", proxy({ mode: "Managed", provider: "k", healthCheck: hc }, { providerID: "x" })],
    ["not a Proxy the schema accepts", proxy({ mode: "Hybrid" })],
  ])("leaves %s unprobed", (_name, p) => {
    const s = proxyHealthSubject(p);
    expect(s.instance === undefined || s.proxy === undefined).toBe(true);
  });

  it("does not seed from a refusal", () => {
    const s = proxyHealthSubject(
      proxy(
        { mode: "Managed", provider: "k", healthCheck: hc },
        { providerID: "x", ip: "1.2.3.4", conditions: [cond("Healthy", "False", "ProbeTargetRefused")] },
      ),
    );
    expect(s.seed).toBeUndefined();
  });
});

describe("proxySpecHash of a Secret's cloud-init", () => {
  it("is keyed by the Secret's UID: a reader of the annotation cannot confirm a guess of the bytes", async () => {
    const guess = "#cloud-config\npassword: hunter2\n";
    const unkeyed = await proxySpecHash({ provider: "p" }, { userData: guess });
    const keyed = await proxySpecHash({ provider: "p" }, { userData: guess, secretUID: "uid-1" });
    expect(keyed).not.toBe(unkeyed);
    expect(keyed).not.toBe(await proxySpecHash({ provider: "p" }, { userData: guess, secretUID: "uid-2" }));
    expect(keyed).toBe(await proxySpecHash({ provider: "p" }, { userData: guess, secretUID: "uid-1" }));
    expect(keyed.startsWith(specHashPrefix)).toBe(true);
  });
});
