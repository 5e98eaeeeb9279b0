import { describe, expect, it } from "vitest";
import { poolUid, subPoolObject } from "../../../test/support/subpools.ts";
import { covers, milliValue } from "../../kube/index.ts";
import type { KubeObject } from "../../kube/port.ts";
import { Resources } from "../../kube/resources.ts";
import { type SubPool, subPoolManagedLabel, subPoolPoolLabel, subPoolSchema } from "./api.ts";
import { type OperatorConfig, parseOperatorConfig } from "./config.ts";
import { subPoolFromKey } from "./controller.ts";
import { decideDeletion, namespaceBlockers } from "./deletion.ts";
import { buildDesired } from "./desired.ts";
import { namespaceOwnership } from "./ownership.ts";
import { type ReadinessObservation, readinessConditions } from "./status.ts";
import { validateSubPool } from "./validate.ts";

const defaults = (() => {
  const r = parseOperatorConfig(undefined);
  if (!r.ok) throw new Error(r.message);
  return r.config;
})();
const withGateway: OperatorConfig = {
  ...defaults,
  gateway: { name: "public", namespace: "gateway-system" },
  hostnameSuffix: "relay.example.com",
};
const pool = (spec: Record<string, unknown> = {}, name = "demo"): SubPool =>
  subPoolSchema.parse(subPoolObject(spec, { name }));
const requests = (cpu: string, memory: string) => ({ requests: { cpu, memory } });

describe("milliValue", () => {
  it.each([
    ["500m", 500],
    ["1", 1000],
    ["1.5", 1500],
    [2, 2000],
    ["1Gi", 2 ** 30 * 1000],
    ["512Mi", 2 ** 29 * 1000],
    ["1k", 1_000_000],
    ["1e3", 1_000_000],
    ["0", 0],
    ["abc", undefined],
    ["1GB", undefined],
  ] as const)("%s → %s", (value, expected) => {
    expect(milliValue(value)).toBe(expected);
  });
});

describe("parseOperatorConfig", () => {
  it.each([
    ["missing ConfigMap → defaults", undefined, { ok: true, cpu: "2", memory: "4Gi" }],
    ["empty data → defaults", {}, { ok: true, cpu: "2", memory: "4Gi" }],
    ["an envelope", { maxCPU: "4", maxMemory: "8Gi" }, { ok: true, cpu: "4", memory: "8Gi" }],
    ["unparsable CPU", { maxCPU: "lots" }, { ok: false }],
    ["zero memory", { maxMemory: "0" }, { ok: false }],
    ["unknown key (a typo)", { maxCpu: "4" }, { ok: false }],
    ["Gateway name without namespace", { gatewayName: "public" }, { ok: false }],
  ] as const)("%s", (_, data, expected) => {
    const r = parseOperatorConfig(data);
    expect(r.ok).toBe(expected.ok);
    if (r.ok && expected.ok)
      expect(r.config.envelope).toEqual({ cpu: expected.cpu, memory: expected.memory });
    if (!r.ok) expect(r.message).toMatch(/^operator configuration: /);
  });
});

describe("validateSubPool", () => {
  it.each([
    ["an Internal pool", pool(), defaults, "ok"],
    ["Gateway with everything from the config", pool({ exposure: { mode: "Gateway" } }), withGateway, "ok"],
    [
      "Gateway with everything in the spec",
      pool({
        exposure: { mode: "Gateway", hostname: "a.example.com", gateway: { name: "g", namespace: "gw" } },
      }),
      defaults,
      "ok",
    ],
    [
      "Gateway without a Gateway",
      pool({ exposure: { mode: "Gateway", hostname: "a.example.com" } }),
      defaults,
      "GatewayConfigIncomplete",
    ],
    [
      "Gateway without a hostname",
      pool({ exposure: { mode: "Gateway" } }),
      { ...defaults, gateway: withGateway.gateway! },
      "GatewayConfigIncomplete",
    ],
    [
      "Gateway config is checked before the spec",
      pool({
        exposure: { mode: "Gateway" },
        cpa: { image: "Not An Image", resources: requests("1", "1Gi") },
      }),
      defaults,
      "GatewayConfigIncomplete",
    ],
    ["an ID longer than 40", pool({}, "a".repeat(41)), defaults, "InvalidSpec"],
    [
      "an image with spaces",
      pool({ cpa: { image: "cpa latest", resources: requests("1", "1Gi") } }),
      defaults,
      "InvalidSpec",
    ],
    [
      "a zero CPU request",
      pool({ cpa: { image: "cpa:1", resources: requests("0", "1Gi") } }),
      defaults,
      "InvalidSpec",
    ],
    [
      "a limit below the request",
      pool({ cpa: { image: "cpa:1", resources: { ...requests("1", "1Gi"), limits: { memory: "512Mi" } } } }),
      defaults,
      "InvalidSpec",
    ],
    ["a zero storage size", pool({ storage: { size: "0" } }), defaults, "InvalidSpec"],
    [
      "CPU 1.8 + 0.25 > 2",
      pool({ cpa: { image: "cpa:1", resources: requests("1800m", "1Gi") } }),
      defaults,
      "ResourceEnvelopeExceeded",
    ],
    [
      "CPU 1.75 + 0.25 = 2 fits",
      pool({ cpa: { image: "cpa:1", resources: requests("1750m", "1Gi") } }),
      defaults,
      "ok",
    ],
    [
      "memory 4Gi + 256Mi > 4Gi",
      pool({ cpa: { image: "cpa:1", resources: requests("1", "4Gi") } }),
      defaults,
      "ResourceEnvelopeExceeded",
    ],
  ] as const)("%s → %s", (_, subPool, config, expected) => {
    const v = validateSubPool(subPool, config);
    expect(v.ok ? "ok" : v.reason).toBe(expected);
  });

  it("derives the hostname <pool>.<suffix> in Gateway mode", () => {
    const v = validateSubPool(pool({ exposure: { mode: "Gateway" } }), withGateway);
    expect(v).toEqual({
      ok: true,
      route: { hostname: "demo.relay.example.com", gateway: { name: "public", namespace: "gateway-system" } },
    });
  });

  it("names the requests and the envelope when it is exceeded", () => {
    const v = validateSubPool(pool({ cpa: { image: "cpa:1", resources: requests("2", "1Gi") } }), defaults);
    expect(v).toMatchObject({
      ok: false,
      message: expect.stringMatching(/cpu requests \(2 \+ 250m\) exceed the platform envelope of 2/),
    });
  });
});

describe("buildDesired", () => {
  const route = {
    hostname: "demo.relay.example.com",
    gateway: { name: "public", namespace: "gateway-system" },
  };
  const kinds = (d: ReturnType<typeof buildDesired>) => d.managed.map((m) => m.object.kind);
  const sts = (d: ReturnType<typeof buildDesired>) =>
    d.managed.find((m) => m.resource === Resources.StatefulSet)!.object as KubeObject & {
      spec: {
        replicas: number;
        volumeClaimTemplates: { spec: { resources: { requests: { storage: string } } } }[];
      };
    };

  it.each([
    ["Internal", pool(), undefined, 1, false],
    ["Internal, suspended", pool({ suspend: true }), undefined, 0, false],
    ["Gateway", pool({ exposure: { mode: "Gateway" } }), route, 1, true],
    ["Gateway, suspended", pool({ exposure: { mode: "Gateway" }, suspend: true }), route, 0, false],
  ] as const)("%s: replicas %s, HTTPRoute %s", (_, subPool, r, replicas, hasRoute) => {
    const d = buildDesired(subPool, defaults, r);
    expect(sts(d).spec.replicas).toBe(replicas);
    expect(d.httpRoute !== undefined).toBe(hasRoute);
    expect(d.status.hostname).toBe(r?.hostname);
  });

  it("derives the Namespace and every object inside it, labelled with the pool", () => {
    const d = buildDesired(pool(), defaults, undefined);
    expect(d.namespace.metadata).toEqual({
      name: "subpool-demo",
      labels: { [subPoolManagedLabel]: "subpool-operator", [subPoolPoolLabel]: "demo" },
    });
    expect(kinds(d)).toEqual([
      "ServiceAccount",
      "ConfigMap",
      "ResourceQuota",
      "NetworkPolicy",
      "Service",
      "StatefulSet",
      "PodDisruptionBudget",
    ]);
    for (const o of [d.credentials, ...d.managed.map((m) => m.object)]) {
      expect(o.metadata.namespace).toBe("subpool-demo");
      expect(o.metadata.labels?.[subPoolPoolLabel]).toBe("demo");
    }
    expect(d.credentials).not.toHaveProperty("data");
    expect(sts(d).spec.volumeClaimTemplates[0]!.spec.resources.requests.storage).toBe("10Gi");
    expect(d.status).toEqual({
      namespace: "subpool-demo",
      cpaService: "demo-cpa.subpool-demo.svc:8080",
      hostname: undefined,
    });
  });

  it("opens the pool to the Gateway's namespace only in Gateway mode", () => {
    const policy = (d: ReturnType<typeof buildDesired>) =>
      JSON.stringify(d.managed.find((m) => m.object.kind === "NetworkPolicy")!.object);
    expect(policy(buildDesired(pool(), defaults, undefined))).not.toContain("gateway-system");
    expect(policy(buildDesired(pool({ exposure: { mode: "Gateway" } }), defaults, route))).toContain(
      "gateway-system",
    );
  });
});

describe("namespaceOwnership", () => {
  const owner = subPoolObject();
  const ours = { [subPoolManagedLabel]: "subpool-operator", [subPoolPoolLabel]: "demo" };
  const ref = (uid: string) => [
    { apiVersion: "subrelay.example.com/v1alpha1", kind: "SubPool", name: "demo", uid, controller: true },
  ];
  const ns = (metadata: Partial<KubeObject["metadata"]>): KubeObject => ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "subpool-demo", ...metadata },
  });
  it.each([
    ["absent", undefined, "absent"],
    [
      "controlled and labelled",
      ns({ ownerReferences: ref(poolUid), labels: { ...ours, team: "x" } }),
      "ours",
    ],
    ["labelled but not controlled (someone else's, same name)", ns({ labels: ours }), "foreign"],
    ["controlled without our labels", ns({ ownerReferences: ref(poolUid) }), "foreign"],
    [
      "labelled for another pool",
      ns({ ownerReferences: ref(poolUid), labels: { ...ours, [subPoolPoolLabel]: "other" } }),
      "foreign",
    ],
    [
      "controlled by a previous SubPool of the same name",
      ns({ ownerReferences: ref("old-uid"), labels: ours }),
      "foreign",
    ],
  ] as const)("%s → %s", (_, namespace, expected) => {
    expect(namespaceOwnership(namespace, owner)).toBe(expected);
  });
});

describe("decideDeletion", () => {
  const ns = (terminating: boolean): KubeObject => ({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "subpool-demo", ...(terminating ? { deletionTimestamp: "2026-11-30T12:00:00Z" } : {}) },
  });
  it.each([
    ["Namespace gone", undefined, false, { kind: "removeFinalizer", namespaceKept: false }],
    ["Namespace ours", ns(false), true, { kind: "deleteNamespace" }],
    ["Namespace ours and terminating", ns(true), true, { kind: "waitForNamespace" }],
    ["Namespace not ours: kept", ns(false), false, { kind: "removeFinalizer", namespaceKept: true }],
  ] as const)("%s → %j", (_, namespace, namespaceIsOurs, expected) => {
    expect(decideDeletion({ namespace, namespaceIsOurs })).toEqual(expected);
  });

  it("explains a stuck Namespace from its conditions", () => {
    const stuck: KubeObject = {
      ...ns(true),
      status: {
        phase: "Terminating",
        conditions: [
          { type: "NamespaceDeletionDiscoveryFailure", status: "False" },
          {
            type: "NamespaceContentRemaining",
            status: "True",
            message: "Some resources are remaining: persistentvolumeclaims. has 1 resource instances",
          },
        ],
      },
    };
    expect(namespaceBlockers(stuck)).toBe(
      "waiting for Namespace subpool-demo to be deleted: NamespaceContentRemaining: Some resources are remaining: persistentvolumeclaims. has 1 resource instances",
    );
    expect(namespaceBlockers(ns(true))).toBe(
      "waiting for Namespace subpool-demo to be deleted (phase unknown)",
    );
  });
});

describe("readinessConditions", () => {
  const up = { ready: true, message: "1 ready endpoint" };
  const down = { ready: false, message: "no ready endpoints" };
  it.each<[string, ReadinessObservation, [string, string, string | null, string]]>([
    [
      "all ready (Internal)",
      { suspended: false, statefulSet: { wanted: 1, ready: 1 }, proxyGateway: up, route: undefined },
      ["True/Ready", "True/EndpointReady", null, "False/Active"],
    ],
    [
      "StatefulSet not ready",
      { suspended: false, statefulSet: { wanted: 1, ready: 0 }, proxyGateway: up, route: undefined },
      ["False/StatefulSetNotReady", "True/EndpointReady", null, "False/Active"],
    ],
    [
      "proxy gateway down",
      { suspended: false, statefulSet: { wanted: 1, ready: 1 }, proxyGateway: down, route: undefined },
      ["False/ProxyGatewayNotReady", "False/ProxyGatewayNotReady", null, "False/Active"],
    ],
    [
      "route accepted",
      {
        suspended: false,
        statefulSet: { wanted: 1, ready: 1 },
        proxyGateway: up,
        route: { state: "accepted", message: "ok" },
      },
      ["True/Ready", "True/EndpointReady", "True/Accepted", "False/Active"],
    ],
    [
      "route pending",
      {
        suspended: false,
        statefulSet: { wanted: 1, ready: 1 },
        proxyGateway: up,
        route: { state: "pending", message: "no" },
      },
      ["False/RouteNotReady", "True/EndpointReady", "False/RouteNotReady", "False/Active"],
    ],
    [
      "Gateway API missing",
      {
        suspended: false,
        statefulSet: { wanted: 1, ready: 1 },
        proxyGateway: up,
        route: { state: "apiMissing", message: "x" },
      },
      ["False/GatewayAPIMissing", "True/EndpointReady", "False/GatewayAPIMissing", "False/Active"],
    ],
    [
      "suspended (Internal)",
      { suspended: true, statefulSet: { wanted: 0, ready: 0 }, proxyGateway: undefined, route: undefined },
      ["False/Suspended", "Unknown/Suspended", null, "True/Suspended"],
    ],
    [
      "suspended (Gateway)",
      {
        suspended: true,
        statefulSet: { wanted: 0, ready: 0 },
        proxyGateway: undefined,
        route: { state: "suspended" },
      },
      ["False/Suspended", "Unknown/Suspended", "False/Suspended", "True/Suspended"],
    ],
  ])("%s", (_, obs, [ready, proxyGateway, route, suspended]) => {
    const c = readinessConditions(obs);
    const s = (x: { status: string; reason: string } | null) => (x ? `${x.status}/${x.reason}` : null);
    expect([s(c.ready), s(c.proxyGateway), s(c.route), s(c.suspended)]).toEqual([
      ready,
      proxyGateway,
      route,
      suspended,
    ]);
  });
});

describe("covers (owned fields against server defaults)", () => {
  it.each([
    ["extra defaulted keys", { a: 1, defaulted: "x" }, { a: 1 }, true],
    ["a changed value", { a: 2 }, { a: 1 }, false],
    ["a missing key", {}, { a: 1 }, false],
    ["array elements with defaults", [{ name: "c", tmp: "/dev" }], [{ name: "c" }], true],
    ["an extra array element", [{ name: "c" }, { name: "d" }], [{ name: "c" }], false],
    [
      "quantities by value under requests",
      { requests: { cpu: "1", memory: "1Gi" } },
      { requests: { cpu: "1000m", memory: "1024Mi" } },
      true,
    ],
    [
      "quantities by value under hard",
      { hard: { "requests.cpu": "500m" } },
      { hard: { "requests.cpu": "0.5" } },
      true,
    ],
    ["strings elsewhere exactly", { image: "1" }, { image: "1000m" }, false],
  ] as const)("%s → %s", (_, observed, desired, expected) => {
    expect(covers(observed, desired)).toBe(expected);
  });
});

describe("subPoolFromKey", () => {
  it.each([
    [Resources.Namespace, { name: "subpool-demo" }, { name: "demo" }],
    [Resources.Secret, { namespace: "subpool-demo", name: "demo-credentials" }, { name: "demo" }],
    [Resources.StatefulSet, { namespace: "subpool-a-b", name: "a-b-cpa-manager" }, { name: "a-b" }],
    [Resources.ConfigMap, { namespace: "subpool-demo", name: "demo-config" }, { name: "demo" }],
    [Resources.ServiceAccount, { namespace: "subpool-demo", name: "demo" }, { name: "demo" }],
    // What the cluster puts in every new Namespace is no drift of the pool.
    [Resources.ConfigMap, { namespace: "subpool-demo", name: "kube-root-ca.crt" }, undefined],
    [Resources.ServiceAccount, { namespace: "subpool-demo", name: "default" }, undefined],
    [Resources.StatefulSet, { namespace: "subpool-a-b", name: "x" }, undefined],
    [Resources.Secret, { namespace: "subpool-demo", name: "demo-config" }, undefined],
    [Resources.Namespace, { name: "default" }, undefined],
    [Resources.ConfigMap, { namespace: "kube-system", name: "x" }, undefined],
    [Resources.Namespace, { name: "subpool-" }, undefined],
  ] as const)("%s %j → %j", (res, key, expected) => {
    expect(subPoolFromKey(res, key)).toEqual(expected);
  });
});
