import { describe, expect, it } from "vitest";
import {
  type Candidate,
  type Engaged,
  intakeCredentialsOf,
  planDiscovery,
  vetKubeconfig,
} from "./cluster-api.ts";
import { parseNodeHostEnv } from "./config.ts";

const kubeconfig = (cluster: Record<string, unknown>, user: Record<string, unknown>, extra = {}) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster }],
    users: [{ name: "u", user }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u" } }],
    "current-context": "ctx",
    ...extra,
  });
const server = { server: "https://10.0.0.1:6443", "certificate-authority-data": "Q0E=" };

describe("vetKubeconfig: a kubeconfig Secret's writer cannot steer the host", () => {
  it.each([
    ["a token", server, { token: "t" }],
    [
      "a client certificate and key",
      server,
      { "client-certificate-data": "Yw==", "client-key-data": "aw==" },
    ],
    ["no CA (the system's roots)", { server: "https://api.example.com" }, { token: "t" }],
  ])("keeps %s", (_, cluster, user) => {
    const vetted = vetKubeconfig(kubeconfig(cluster, user));
    expect("kubeconfig" in vetted).toBe(true);
    const out = JSON.parse((vetted as { kubeconfig: string }).kubeconfig);
    expect(out.clusters[0].cluster).toEqual(cluster);
    expect(out.users[0].user).toEqual(user);
  });

  it.each([
    [
      "an exec plugin (a command the host would run)",
      server,
      { exec: { command: "/bin/sh", args: ["-c", "id"] } },
    ],
    ["an auth provider", server, { "auth-provider": { name: "oidc", config: {} } }],
    ["a token file (a file the host would read)", server, { tokenFile: "/etc/shadow" }],
    ["a client certificate by path", server, { "client-certificate": "/k.crt", "client-key": "/k.key" }],
    ["impersonation", server, { token: "t", as: "system:admin" }],
    ["a password", server, { username: "a", password: "b" }],
    ["no credential", server, {}],
    ["a CA by path", { server: server.server, "certificate-authority": "/etc/ca.crt" }, { token: "t" }],
    ["skipped TLS verification", { ...server, "insecure-skip-tls-verify": true }, { token: "t" }],
    ["a proxy", { ...server, "proxy-url": "http://10.0.0.9:3128" }, { token: "t" }],
    ["plain http", { server: "http://10.0.0.1:8080" }, { token: "t" }],
  ])("refuses %s", (_, cluster, user) => {
    expect(vetKubeconfig(kubeconfig(cluster, user))).toMatchObject({
      refusal: { reason: "KubeconfigInvalid" },
    });
  });

  it("refuses a current-context it does not have, and text that is not YAML", () => {
    expect(vetKubeconfig(kubeconfig(server, { token: "t" }, { "current-context": "other" }))).toMatchObject({
      refusal: { reason: "KubeconfigInvalid" },
    });
    expect(vetKubeconfig("{ not: [yaml")).toMatchObject({ refusal: { reason: "KubeconfigInvalid" } });
  });
});

describe("intakeCredentialsOf", () => {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  it.each([
    ["no Secret", undefined, { credentials: {} }],
    ["an audit token", { auditToken: b64("a".repeat(16)) }, { credentials: { auditToken: "a".repeat(16) } }],
    [
      "both",
      { auditToken: b64("a".repeat(16)), relaySecret: b64("r".repeat(20)) },
      { credentials: { auditToken: "a".repeat(16), relaySecret: "r".repeat(20) } },
    ],
  ])("%s", (_, data, want) => {
    expect(intakeCredentialsOf(data)).toEqual(want);
  });

  it("ignores the Secret's kubeconfig key", () => {
    expect(intakeCredentialsOf({ kubeconfig: b64("apiVersion: v1") })).toEqual({ credentials: {} });
  });

  it("refuses a short secret", () => {
    expect(intakeCredentialsOf({ relaySecret: b64("short") })).toMatchObject({
      refusal: { reason: "IntakeSecretInvalid" },
    });
  });
});

const candidate = (name: string, over: Partial<Candidate> = {}): Candidate => ({
  key: `fleet/${name}`,
  name,
  created: "2026-01-01T00:00:00Z",
  kubeconfig: "{}",
  credentials: {},
  hash: `h-${name}`,
  ...over,
});
const engaged = (entries: [string, Engaged][]) => new Map(entries);

describe("planDiscovery", () => {
  it.each<[string, Parameters<typeof planDiscovery>, { stop: string[]; start: string[]; refuse: string[] }]>([
    [
      "starts a new cluster",
      [[candidate("a")], new Set(), engaged([]), []],
      { stop: [], start: ["a"], refuse: [] },
    ],
    [
      "keeps one unchanged",
      [[candidate("a")], new Set(), engaged([["a", { key: "fleet/a", hash: "h-a" }]]), []],
      { stop: [], start: [], refuse: [] },
    ],
    [
      "restarts one whose kubeconfig changed",
      [[candidate("a", { hash: "new" })], new Set(), engaged([["a", { key: "fleet/a", hash: "h-a" }]]), []],
      { stop: ["a"], start: ["a"], refuse: [] },
    ],
    [
      "stops one whose Cluster is gone (or no longer provisioned)",
      [[], new Set(), engaged([["a", { key: "fleet/a", hash: "h-a" }]]), []],
      { stop: ["a"], start: [], refuse: [] },
    ],
    [
      "keeps one whose Cluster could not be read",
      [[], new Set(["fleet/a"]), engaged([["a", { key: "fleet/a", hash: "h-a" }]]), []],
      { stop: [], start: [], refuse: [] },
    ],
    [
      "refuses a name declared in KUBEFN_CLUSTERS",
      [[candidate("hub")], new Set(), engaged([]), [{ name: "hub", credentials: {} }]],
      { stop: [], start: [], refuse: ["fleet/hub:NameClash"] },
    ],
    [
      "refuses the younger of two same-named Clusters in two namespaces",
      [
        [
          candidate("a", { key: "other/a", created: "2026-02-01T00:00:00Z" }),
          candidate("a", { created: "2026-01-01T00:00:00Z" }),
        ],
        new Set(),
        engaged([]),
        [],
      ],
      { stop: [], start: ["a"], refuse: ["other/a:NameClash"] },
    ],
    [
      "refuses an intake credential another cluster holds",
      [
        [candidate("a", { credentials: { auditToken: "t".repeat(16) } })],
        new Set(),
        engaged([]),
        [{ name: "hub", credentials: { auditToken: "t".repeat(16) } }],
      ],
      { stop: [], start: [], refuse: ["fleet/a:IntakeCredentialInUse"] },
    ],
    [
      "refuses a cluster past the most a fleet has",
      [[candidate("a"), candidate("b")], new Set(), engaged([]), [{ name: "hub", credentials: {} }], 2],
      { stop: [], start: ["a"], refuse: ["fleet/b:TooManyClusters"] },
    ],
    [
      "a name moves to another namespace's Cluster: the old stops, the new starts",
      [
        [candidate("a", { key: "other/a" })],
        new Set(),
        engaged([["a", { key: "fleet/a", hash: "h-a" }]]),
        [],
      ],
      { stop: ["a"], start: ["a"], refuse: [] },
    ],
  ])("%s", (_, args, want) => {
    const plan = planDiscovery(...args);
    expect({
      stop: plan.stop,
      start: plan.start.map((c) => c.name),
      refuse: plan.refuse.map((r) => `${r.key}:${r.refusal.reason}`),
    }).toEqual(want);
  });
});

describe("KUBEFN_CLUSTER_API", () => {
  const setting = {
    server: "https://10.0.0.1:6443",
    credential: { kind: "token", token: "t" },
    namespaces: ["fleet"],
  };
  it("is parsed, with a resync period by default", () => {
    expect(parseNodeHostEnv({ KUBEFN_CLUSTER_API: JSON.stringify(setting) }).clusterApi).toEqual({
      ...setting,
      resyncSeconds: 300,
    });
  });

  it.each([
    ["no namespace", { ...setting, namespaces: [] }, /namespace/],
    ["a namespace that is no DNS label", { ...setting, namespaces: ["Fleet_1"] }, /DNS label/],
    ["no server for a token", { ...setting, server: undefined }, /server is required/],
    [
      "a credential the Node host cannot use",
      { ...setting, credential: { kind: "google", key: "{}" } },
      /management/,
    ],
    ["an unknown field", { ...setting, labelSelector: "a=b" }, /labelSelector|Unrecognized/],
    ["a resync period under 10 s", { ...setting, resyncSeconds: 1 }, /resyncSeconds|>=10/],
  ])("refuses %s", (_, value, message) => {
    expect(() => parseNodeHostEnv({ KUBEFN_CLUSTER_API: JSON.stringify(value) })).toThrow(message);
  });

  it("refuses text that is no JSON object and a file that cannot be read", () => {
    expect(() => parseNodeHostEnv({ KUBEFN_CLUSTER_API: "{nope" })).toThrow(/JSON object/);
    expect(() => parseNodeHostEnv({ KUBEFN_CLUSTER_API: "/nonexistent/cluster-api.json" })).toThrow(
      /cannot read/,
    );
  });
});
