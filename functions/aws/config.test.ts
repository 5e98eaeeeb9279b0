import { describe, expect, it } from "vitest";
import { AwsConfigError, parseAwsEnv } from "./config.ts";

const base = {
  AWS_REGION: "eu-west-1",
  EVENT_BUS_NAME: "kubefn",
  SCHEDULER_ROLE_ARN: "arn:aws:iam::111122223333:role/kubefn-scheduler",
  KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
};

describe("parseAwsEnv", () => {
  it("decodes the inline kubeconfig and fills the defaults", () => {
    expect(parseAwsEnv(base)).toEqual({
      kubeconfig: { yaml: "apiVersion: v1\nkind: Config\n" },
      region: "eu-west-1",
      eventBusName: "kubefn",
      scheduleGroup: "default",
      schedulerRoleArn: base.SCHEDULER_ROLE_ARN,
      selfUsernames: ["system:serviceaccount:kubefn-system:kubefn"],
      maxBodyBytes: 4 * 1024 * 1024,
      replayWindowSeconds: 300,
      sweepPeriodSeconds: 60,
      requestBudget: 1000,
      circuit: { failureThreshold: 5, openSeconds: 5 },
      kubeTimeoutMs: 30_000,
      logLevel: "info",
      probeConcurrency: 32,
      passConcurrency: 8,
      probeShardSize: 40,
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
      SCHEDULE_GROUP: "kubefn",
      FUNCTION_ARN: "arn:aws:lambda:eu-west-1:111122223333:function:kubefn",
      AUDIT_TOKEN: "a".repeat(32),
      RELAY_SECRET: "r".repeat(32),
      SELF_USERNAMES: "system:serviceaccount:kubefn-system:kubefn, arn:aws:iam::111122223333:role/kubefn",
      PASS_CONCURRENCY: "4",
      PROXY_RESYNC_SECONDS: "900",
    });
    expect(config).toMatchObject({
      scheduleGroup: "kubefn",
      functionArn: "arn:aws:lambda:eu-west-1:111122223333:function:kubefn",
      auditToken: "a".repeat(32),
      relaySecret: "r".repeat(32),
      selfUsernames: ["system:serviceaccount:kubefn-system:kubefn", "arn:aws:iam::111122223333:role/kubefn"],
      passConcurrency: 4,
      proxyResyncSeconds: 900,
    });
  });

  it("treats empty variables as unset", () => {
    expect(parseAwsEnv({ ...base, AUDIT_TOKEN: "", RELAY_SECRET: "", FUNCTION_ARN: "" })).not.toHaveProperty(
      "auditToken",
    );
  });

  it("names every bad variable in one error", () => {
    const { KUBECONFIG_BASE64: _, ...rest } = base;
    const bad = () =>
      parseAwsEnv({ ...rest, EVENT_BUS_NAME: undefined, SCHEDULER_ROLE_ARN: "kubefn", AUDIT_TOKEN: "short" });
    expect(bad).toThrow(AwsConfigError);
    expect(bad).toThrow(/EVENT_BUS_NAME: EVENT_BUS_NAME is required/);
    expect(bad).toThrow(/SCHEDULER_ROLE_ARN: SCHEDULER_ROLE_ARN must be an ARN/);
    expect(bad).toThrow(/AUDIT_TOKEN: AUDIT_TOKEN must be at least 16 characters/);
  });

  it("requires a kubeconfig", () => {
    const { KUBECONFIG_BASE64: _, ...rest } = base;
    expect(() => parseAwsEnv(rest)).toThrow(
      /set KUBECONFIG_SECRET_ARN \(a Secrets Manager secret holding the base64 kubeconfig\), KUBECONFIG_BASE64 \(local runs\) or KUBECONFIG/,
    );
  });
  it("fans probes out in shards of 40 by default (delayed shards travel whole); 0 probes in the sweep", () => {
    expect(parseAwsEnv(base).probeShardSize).toBe(40);
    expect(parseAwsEnv({ ...base, PROBE_SHARD_SIZE: "10" }).probeShardSize).toBe(10);
    expect(parseAwsEnv({ ...base, PROBE_SHARD_SIZE: "0" }).probeShardSize).toBeUndefined();
  });
});
