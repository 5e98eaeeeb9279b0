import { describe, expect, it } from "vitest";
import { parseWorkerEnv, WorkerConfigError } from "./config.ts";

const minimal = { KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t0ken" };

describe("parseWorkerEnv", () => {
  it("fills defaults from the minimal env", () => {
    expect(parseWorkerEnv(minimal)).toEqual({
      kubeServer: "https://kube.example.com",
      kubeVia: "direct",
      kubeAuth: { token: "t0ken" },
      selfUsernames: ["system:serviceaccount:kubefn-system:kubefn"],
      maxBodyBytes: 4 * 1024 * 1024,
      replayWindowSeconds: 300,
      sweepPeriodSeconds: 60,
      requestBudget: 1000,
      admissionRecheckSeconds: 60,
      stateChangesPerInvocation: 100,
      circuit: { failureThreshold: 5, openSeconds: 5 },
      kubeTimeoutMs: 30_000,
      logLevel: "info",
      probeConcurrency: 6,
      passConcurrency: 8,
      probeShardSize: 40,
      // A Worker's URL is public: the fleet page is served only behind API_TOKEN.
      fleetPage: "token",
      operators: expect.any(Object),
    });
    expect(parseWorkerEnv({ ...minimal, FLEET_PAGE: "open" }).fleetPage).toBe("open");
    expect(() => parseWorkerEnv({ ...minimal, FLEET_PAGE: "public" })).toThrow(/FLEET_PAGE/);
  });

  it("reads [vars] strings, secrets and lists", () => {
    const config = parseWorkerEnv({
      ...minimal,
      AUDIT_TOKEN: "a".repeat(16),
      RELAY_SECRET: "r".repeat(32),
      SELF_USERNAMES: "system:serviceaccount:x:y, alice ,",
      MAX_BODY_BYTES: "65536",
      PROXY_RESYNC_SECONDS: 600,
      KUBEFN_QUEUE: {},
    });
    expect(config).toMatchObject({
      auditToken: "a".repeat(16),
      relaySecret: "r".repeat(32),
      selfUsernames: ["system:serviceaccount:x:y", "alice"],
      maxBodyBytes: 65536,
      operators: { proxy: { resyncSeconds: 600 } },
    });
    expect(parseWorkerEnv({ ...minimal, KUBE_VIA: "relay", RELAY_SECRET: "r".repeat(32) }).kubeVia).toBe(
      "relay",
    );
  });

  it.each([
    [{}, ["KUBE_SERVER", "KUBE_TOKEN"]],
    [{ ...minimal, KUBE_SERVER: "ftp://x" }, ["KUBE_SERVER"]],
    [{ ...minimal, AUDIT_TOKEN: "short" }, ["AUDIT_TOKEN: AUDIT_TOKEN must be at least 16"]],
    [{ ...minimal, MAX_BODY_BYTES: "lots" }, ["MAX_BODY_BYTES"]],
    [{ ...minimal, SWEEP_PERIOD_SECONDS: "30" }, ["SWEEP_PERIOD_SECONDS"]],
    [{ ...minimal, KUBE_VIA: "relay" }, ["KUBE_VIA", "RELAY_SECRET"]],
    [{ ...minimal, KUBE_VIA: "tunnel" }, ["KUBE_VIA"]],
  ])("rejects %j naming %j", (env, named) => {
    let error: unknown;
    try {
      parseWorkerEnv(env);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(WorkerConfigError);
    for (const name of named) expect((error as Error).message).toContain(name);
  });
});

describe("declared clusters on the Worker", () => {
  const east = {
    name: "east",
    server: "https://east.example",
    credential: { kind: "token", token: "t-east" },
  };
  const gke = {
    name: "gke",
    server: "https://34.1.2.3",
    credential: {
      kind: "google",
      key: JSON.stringify({
        client_email: "kubefn@p.iam.gserviceaccount.com",
        private_key: "-----BEGIN PRIVATE KEY-----",
      }),
    },
  };
  const own = {
    name: "own",
    server: "https://own.example",
    credential: { kind: "oidc-issuer", audience: "own" },
  };
  /** kubefn's OIDC issuer, with a freshly made EC signing key. */
  const issuer = async () => {
    const pair = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
      "sign",
      "verify",
    ])) as CryptoKeyPair;
    const jwk = { ...(await crypto.subtle.exportKey("jwk", pair.privateKey)), kid: "k1" };
    return { OIDC_ISSUER: "https://kubefn.example", OIDC_SIGNING_KEY: JSON.stringify(jwk) };
  };
  const clusters = (...cs: unknown[]) => ({ KUBEFN_CLUSTERS: JSON.stringify(cs) });

  it("reaches each declared cluster with its own server and credential (token, google, oidc-issuer)", async () => {
    const config = parseWorkerEnv({
      KUBE_SERVER: "https://kube.example.com",
      ...(await issuer()),
      ...clusters(east, gke, own),
    });
    expect(config.fleet?.map((c) => [c.declared.name, c.kubeServer])).toEqual([
      ["east", "https://east.example"],
      ["gke", "https://34.1.2.3"],
      ["own", "https://own.example"],
    ]);
    expect(config.fleet?.[0]?.kubeAuth).toEqual({ token: "t-east" });
    expect(config.fleet?.[1]?.kubeAuth).toMatchObject({
      google: { client_email: "kubefn@p.iam.gserviceaccount.com" },
    });
    // kubefn's own tokens for this cluster carry its audience alone.
    expect(config.fleet?.[2]?.kubeAuth).toMatchObject({
      oidc: { issuer: "https://kubefn.example", audience: "own" },
    });
  });

  it("keeps one cluster and today's settings unchanged without KUBEFN_CLUSTERS", () => {
    expect(parseWorkerEnv(minimal).fleet).toBeUndefined();
  });

  it("allows plain http only to a loopback pass-through", () => {
    const local = { ...east, server: "http://127.0.0.1:8001" };
    expect(
      parseWorkerEnv({ KUBE_SERVER: "https://k.example", ...clusters(local) }).fleet?.[0]?.kubeServer,
    ).toBe("http://127.0.0.1:8001");
    expect(() =>
      parseWorkerEnv({
        KUBE_SERVER: "https://k.example",
        ...clusters({ ...east, server: "http://east.example" }),
      }),
    ).toThrow(/KUBEFN_CLUSTERS.*must be an https URL/);
  });

  it.each([
    [
      "a kubeconfig file (a Worker has no files)",
      clusters({ name: "k", credential: { kind: "kubeconfig", file: "/k" } }),
      /k: credential kind kubeconfig cannot be used on this platform \(it uses token, google, oidc-issuer\)/,
    ],
    [
      "in-cluster (a Worker runs in no Pod)",
      clusters({ name: "pod", credential: { kind: "in-cluster" } }),
      /pod: credential kind in-cluster cannot be used/,
    ],
    [
      "eks (a Worker holds no AWS role)",
      clusters({ ...east, credential: { kind: "eks", clusterName: "p", region: "eu-west-1" } }),
      /east: credential kind eks cannot be used/,
    ],
    [
      "a private CA (a Worker trusts public roots only)",
      clusters({ ...east, ca: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----" }),
      /east: ca cannot be used on this platform/,
    ],
    [
      "oidc-issuer without the issuer's settings",
      clusters(own),
      /own: credential kind oidc-issuer needs OIDC_ISSUER/,
    ],
    [
      "a google key that is not one",
      clusters({ ...gke, credential: { kind: "google", key: "{}" } }),
      /gke: credential google: key must be a service-account key/,
    ],
    [
      'KUBE_VIA = "relay" (its tunnel carries one cluster)',
      { ...clusters(east), KUBE_VIA: "relay" },
      /KUBE_VIA: KUBE_VIA = "relay" carries one cluster's API requests/,
    ],
    [
      "AUDIT_TOKEN beside declared clusters (each has its own)",
      { ...clusters(east), AUDIT_TOKEN: "a".repeat(16) },
      /each cluster's auditToken and relaySecret are its own/,
    ],
  ])("refuses at start %s", (_what, env, message) => {
    expect(() => parseWorkerEnv({ KUBE_SERVER: "https://k.example", ...env })).toThrow(message);
    expect(() => parseWorkerEnv({ KUBE_SERVER: "https://k.example", ...env })).toThrow(WorkerConfigError);
  });
});
