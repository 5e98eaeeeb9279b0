import { describe, expect, it } from "vitest";
import { AwsConfigError, parseAwsEnv } from "./config.ts";

const base = {
  AWS_REGION: "eu-west-1",
  QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
  KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
};

describe("parseAwsEnv", () => {
  it("decodes the inline kubeconfig and fills the defaults", () => {
    expect(parseAwsEnv(base)).toEqual({
      kubeconfig: { yaml: "apiVersion: v1\nkind: Config\n" },
      eksRenewAfterMs: 600_000,
      region: "eu-west-1",
      queueUrl: base.QUEUE_URL,
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
      probeConcurrency: 32,
      passConcurrency: 8,
      probeShardSize: 40,
      // A Function URL is public: the fleet page is served only behind API_TOKEN.
      fleetPage: "token",
      // The reconcile function reads no intake secret to derive a seal key from.
      deriveStatusSealKey: false,
      operators: expect.any(Object),
    });
  });

  it("takes a bundled kubeconfig file when no inline one is set", () => {
    const { KUBECONFIG_BASE64: _, ...rest } = base;
    expect(parseAwsEnv({ ...rest, KUBECONFIG: "/var/task/kubeconfig" }).kubeconfig).toEqual({
      file: "/var/task/kubeconfig",
    });
  });

  it("reads the optional settings", () => {
    const config = parseAwsEnv({
      ...base,
      AUDIT_TOKEN: "a".repeat(32),
      RELAY_SECRET: "r".repeat(32),
      SELF_USERNAMES: "system:serviceaccount:kubefn-system:kubefn, arn:aws:iam::111122223333:role/kubefn",
      PASS_CONCURRENCY: "4",
      PROXY_RESYNC_SECONDS: "900",
      STATE_CHANGES_BUS: "kubefn-changes",
      STATE_CHANGES_PER_INVOCATION: "20",
    });
    expect(config).toMatchObject({
      stateChangesBus: "kubefn-changes",
      stateChangesPerInvocation: 20,
      auditToken: "a".repeat(32),
      relaySecret: "r".repeat(32),
      selfUsernames: ["system:serviceaccount:kubefn-system:kubefn", "arn:aws:iam::111122223333:role/kubefn"],
      passConcurrency: 4,
      operators: { proxy: { resyncSeconds: 900 } },
    });
  });

  it("treats empty variables as unset", () => {
    expect(parseAwsEnv({ ...base, AUDIT_TOKEN: "", RELAY_SECRET: "" })).not.toHaveProperty("auditToken");
  });

  it("names every bad variable in one error", () => {
    const { KUBECONFIG_BASE64: _, ...rest } = base;
    const bad = () =>
      parseAwsEnv({ ...rest, AWS_REGION: undefined, QUEUE_URL: "kubefn", AUDIT_TOKEN: "short" });
    expect(bad).toThrow(AwsConfigError);
    expect(bad).toThrow(/AWS_REGION: AWS_REGION is required/);
    expect(bad).toThrow(/QUEUE_URL: QUEUE_URL must be an SQS queue URL/);
    expect(() => parseAwsEnv({ ...base, QUEUE_URL: undefined })).toThrow(/QUEUE_URL: QUEUE_URL is required/);
    expect(bad).toThrow(/AUDIT_TOKEN: AUDIT_TOKEN must be at least 16 characters/);
    expect(() => parseAwsEnv({ ...base, STATE_CHANGES_BUS: "a bus" })).toThrow(
      /STATE_CHANGES_BUS must be an EventBridge bus name or ARN/,
    );
  });

  it("requires a kubeconfig, an EKS cluster or a Google service account", () => {
    const { KUBECONFIG_BASE64: _, ...rest } = base;
    expect(() => parseAwsEnv(rest)).toThrow(
      /set KUBECONFIG_SECRET_ARN \(a Secrets Manager secret holding the base64 kubeconfig\), KUBECONFIG_BASE64 \(local runs\), KUBECONFIG \(a file in the bundle\), EKS_CLUSTER_NAME or KUBE_GOOGLE_CREDENTIALS_SECRET_ARN/,
    );
  });
  it("fans probes out in shards of 40 by default (delayed shards travel whole); 0 probes in the sweep", () => {
    expect(parseAwsEnv(base).probeShardSize).toBe(40);
    expect(parseAwsEnv({ ...base, PROBE_SHARD_SIZE: "10" }).probeShardSize).toBe(10);
    expect(parseAwsEnv({ ...base, PROBE_SHARD_SIZE: "0" }).probeShardSize).toBeUndefined();
  });
});

describe("declared clusters on Lambda", () => {
  const { KUBECONFIG_BASE64: _, ...queue } = base;
  const clusters = (...cs: unknown[]) => ({ ...queue, KUBEFN_CLUSTERS: JSON.stringify(cs) });
  const eks = {
    name: "prod",
    server: "https://x.eks.amazonaws.com",
    ca: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----",
    credential: { kind: "eks", clusterName: "p", region: "eu-west-1" },
  };
  const token = { name: "edge", server: "https://edge.example", credential: { kind: "token", token: "t" } };
  const file = { name: "lab", credential: { kind: "kubeconfig", file: "/var/task/lab.kubeconfig" } };

  it("takes token, kubeconfig and eks clusters, with their CA, and no kubeconfig of today's settings", () => {
    const config = parseAwsEnv(clusters(eks, token, file));
    expect(config.clusters?.map((c) => [c.name, c.credential.kind])).toEqual([
      ["prod", "eks"],
      ["edge", "token"],
      ["lab", "kubeconfig"],
    ]);
    expect(config.clusters?.[0]?.ca).toMatch(/BEGIN CERTIFICATE/);
  });

  it("keeps one cluster and today's settings unchanged without KUBEFN_CLUSTERS", () => {
    expect(parseAwsEnv(base).clusters).toBeUndefined();
  });

  it.each([
    [
      "in-cluster (a function runs in no Pod)",
      clusters({ name: "pod", credential: { kind: "in-cluster" } }),
      /pod: credential kind in-cluster cannot be used on this platform \(it uses token, kubeconfig, eks, google, oidc-issuer\)/,
    ],
    [
      "oidc-issuer without the issuer's settings",
      clusters({ ...token, credential: { kind: "oidc-issuer", audience: "edge" } }),
      /edge: credential kind oidc-issuer needs OIDC_ISSUER and OIDC_SIGNING_KEY/,
    ],
    [
      "a google key that is not one",
      clusters({ ...token, credential: { kind: "google", key: "{}" } }),
      /edge: credential google: key must be a service-account key/,
    ],
    [
      "AUDIT_TOKEN beside declared clusters (each has its own)",
      { ...clusters(token), AUDIT_TOKEN: "a".repeat(16) },
      /each cluster's auditToken and relaySecret are its own/,
    ],
  ])("refuses at start %s", (_what, env, message) => {
    expect(() => parseAwsEnv(env)).toThrow(message);
    expect(() => parseAwsEnv(env)).toThrow(AwsConfigError);
  });
});
