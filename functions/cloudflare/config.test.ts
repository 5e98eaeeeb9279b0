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
  it("refuses KUBEFN_CLUSTERS at start: a Worker reconciles only the cluster of its own settings (for now)", () => {
    const east = { name: "east", server: "https://east.example", credential: { kind: "token", token: "t" } };
    expect(() => parseWorkerEnv({ ...minimal, KUBEFN_CLUSTERS: JSON.stringify([east]) })).toThrow(
      /KUBEFN_CLUSTERS: east: credential kind token cannot be used on this platform \(it reconciles only the cluster of its own settings\)/,
    );
  });
});
