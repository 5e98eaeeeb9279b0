import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createOperators } from "../../shared/app/operators.ts";
import { eksAuditFilterPattern, MAX_FILTER_PATTERN_LENGTH } from "../../shared/audit-export/index.ts";
import { matchesFilterPattern } from "../../test/fixtures/cloudwatch-filter.ts";

// CloudFormation's short tags (!Ref, !Sub, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as {
  Parameters: Record<string, { Default?: string }>;
  Conditions: Record<string, unknown>;
  Resources: Record<
    string,
    { Type: string; Condition?: string; DependsOn?: string; Properties: Record<string, unknown> }
  >;
};

const registry = createOperators({
  prober: { probe: async () => ({ ok: true, latencyMs: 1 }) as never },
  sweepPeriodSeconds: 60,
}).registry;

describe("infra/aws/template.yaml: the EKS audit log subscription", () => {
  it("its filter pattern is the one the registry gives (regenerate with eksAuditFilterPattern when kinds change)", () => {
    const expected = eksAuditFilterPattern(registry);
    expect(template.Resources.EksAuditLogSubscription?.Properties.FilterPattern).toBe(expected);
    expect(expected.length).toBeLessThanOrEqual(MAX_FILTER_PATTERN_LENGTH);
    for (const c of registry.controllers)
      expect(expected).toContain(`$.objectRef.resource = "${c.for.resource}"`);
  });

  it("is optional: both resources only with an EKS cluster name, which is empty by default", () => {
    expect(template.Parameters.EksClusterName?.Default).toBe("");
    expect(template.Resources.EksAuditLogSubscription).toMatchObject({
      Type: "AWS::Logs::SubscriptionFilter",
      Condition: "HasEksCluster",
      DependsOn: "EksAuditLogPermission",
      Properties: {
        // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation !Sub syntax
        LogGroupName: "/aws/eks/${EksClusterName}/cluster",
        DestinationArn: "KubefnReconcile.Arn",
      },
    });
  });

  it("lets only CloudWatch Logs of this account, for that log group, invoke the reconcile function", () => {
    expect(template.Resources.EksAuditLogPermission).toMatchObject({
      Type: "AWS::Lambda::Permission",
      Condition: "HasEksCluster",
      Properties: {
        FunctionName: "KubefnReconcile.Arn",
        Action: "lambda:InvokeFunction",
        Principal: "logs.amazonaws.com",
        SourceAccount: "AWS::AccountId",
        SourceArn:
          // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation !Sub syntax
          "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/eks/${EksClusterName}/cluster:*",
      },
    });
  });
});

describe("the committed filter pattern, read as CloudWatch Logs reads it", () => {
  const pattern = template.Resources.EksAuditLogSubscription?.Properties.FilterPattern as string;
  const audit = (name: string) =>
    JSON.parse(
      readFileSync(new URL(`../../test/fixtures/audit/devcluster-${name}.json`, import.meta.url), "utf8"),
    ).items[0] as Record<string, unknown>;

  it.each([
    ["proxy-create", true],
    ["proxy-delete", true],
    ["secret-create", true],
    ["self-write", true], // the intake drops it by user
    ["proxy-create-conflict", true], // the intake drops it by code
    ["proxy-status-patch", false],
    ["pod-owned-create", false],
  ])("devcluster %s passes: %s", (name, passes) => {
    expect(matchesFilterPattern(pattern, audit(name))).toBe(passes);
  });

  it("a read, an unrelated kind and a scale write", () => {
    const base = audit("proxy-create");
    expect(matchesFilterPattern(pattern, { ...base, verb: "get" })).toBe(false);
    expect(matchesFilterPattern(pattern, { ...base, stage: "ResponseStarted" })).toBe(false);
    expect(matchesFilterPattern(pattern, { ...base, objectRef: { resource: "leases" } })).toBe(false);
    expect(
      matchesFilterPattern(pattern, {
        ...base,
        objectRef: { resource: "statefulsets", subresource: "scale" },
      }),
    ).toBe(true);
  });

  it("issue 33: the status writes of a StatefulSet and a Deployment (their readiness) pass; other status writes do not", () => {
    const base = audit("proxy-create");
    const status = (resource: string) => ({
      ...base,
      verb: "update",
      objectRef: { resource, subresource: "status" },
    });
    expect(matchesFilterPattern(pattern, status("statefulsets"))).toBe(true);
    expect(matchesFilterPattern(pattern, status("deployments"))).toBe(true);
    expect(matchesFilterPattern(pattern, status("poddisruptionbudgets"))).toBe(false);
    expect(matchesFilterPattern(pattern, status("pods"))).toBe(false);
  });
});

describe("infra/aws/template.yaml: the reconcile queue", () => {
  const fn = template.Resources.KubefnReconcile?.Properties as {
    Timeout: number;
    Environment: { Variables: Record<string, unknown> };
    Events: Record<string, { Type: string; Properties: Record<string, unknown> }>;
  };
  const queue = template.Resources.ReconcileQueue?.Properties as Record<string, unknown>;

  it("is the reconcile function's event source, batches of 10 with partial batch failures, and its QUEUE_URL", () => {
    expect(fn.Events.Queue).toEqual({
      Type: "SQS",
      Properties: {
        Queue: "ReconcileQueue.Arn",
        BatchSize: 10,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
      },
    });
    expect(fn.Environment.Variables.QUEUE_URL).toBe("ReconcileQueue");
  });

  it("redrives to the dead-letter queue after maxReceiveCount, its visibility six times the function's timeout", () => {
    expect(queue.RedrivePolicy).toEqual({ deadLetterTargetArn: "DeadLetterQueue.Arn", maxReceiveCount: 5 });
    expect(queue.VisibilityTimeout).toBe(6 * fn.Timeout);
    expect(template.Resources.DeadLetterQueue?.Type).toBe("AWS::SQS::Queue");
  });

  it("keeps 0.1.0's bus, its rule, the schedule group and the role Scheduler assumes only on an upgrade that asks (PreviousReleaseCarriers keep): a fresh stack has none", () => {
    expect(template.Parameters.PreviousReleaseCarriers).toMatchObject({
      Default: "retire",
      AllowedValues: ["retire", "keep"],
    });
    expect(template.Conditions.KeepsPreviousCarriers).toEqual(["PreviousReleaseCarriers", "keep"]);
    for (const [name, type] of [
      ["Bus", "AWS::Events::EventBus"],
      ["PreviousReleaseRule", "AWS::Events::Rule"],
      ["PreviousReleaseRulePermission", "AWS::Lambda::Permission"],
      ["ScheduleGroup", "AWS::Scheduler::ScheduleGroup"],
      ["SchedulerRole", "AWS::IAM::Role"],
    ])
      expect(template.Resources[name as string]).toMatchObject({
        Type: type,
        Condition: "KeepsPreviousCarriers",
      });
    expect(template.Resources.PreviousReleaseRule?.Properties).toMatchObject({
      EventPattern: { source: ["kubefn"], "detail-type": ["kubefn.reconcile"] },
    });
    expect(fn.Events).not.toHaveProperty("Reconcile");
  });
});

describe("infra/aws/template.yaml: credentials come from Secrets Manager at cold start", () => {
  const variablesOf = (fn: string) =>
    (template.Resources[fn]?.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
      ?.Variables ?? {};

  it.each(["Kubefn", "KubefnReconcile"])(
    "%s's environment holds only the secrets' ARNs, never their values",
    (fn) => {
      const vars = variablesOf(fn);
      // The intake's: its own credential when given (issue 30, Low), else kubefn's.
      expect(vars.KUBECONFIG_SECRET_ARN).toEqual(
        fn === "Kubefn"
          ? ["HasIntakeKubeconfig", "IntakeKubeconfigSecretArn", "KubeconfigSecretArn"]
          : "KubeconfigSecretArn",
      );
      expect(vars.KUBE_GOOGLE_CREDENTIALS_SECRET_ARN).toEqual(
        fn === "Kubefn"
          ? ["HasIntakeKubeGoogle", "IntakeKubeGoogleCredentialsSecretArn", "KubeGoogleCredentialsSecretArn"]
          : "KubeGoogleCredentialsSecretArn",
      );
      for (const value of [
        "KUBECONFIG_BASE64",
        "GCE_CREDENTIALS",
        "KUBE_GOOGLE_CREDENTIALS",
        "AUDIT_TOKEN",
        "RELAY_SECRET",
      ])
        expect(vars).not.toHaveProperty(value);
      expect(JSON.stringify(vars)).not.toContain("resolve:secretsmanager");
    },
  );

  it("each function is told only the secrets it needs: the intake's to the intake, the GCE key to reconcile", () => {
    expect(variablesOf("Kubefn")).toMatchObject({
      AUDIT_TOKEN_SECRET_ARN: "AuditTokenSecretArn",
      RELAY_SECRET_ARN: "RelaySecretArn",
    });
    expect(variablesOf("Kubefn")).not.toHaveProperty("GCE_CREDENTIALS_SECRET_ARN");
    expect(variablesOf("KubefnReconcile")).toHaveProperty("GCE_CREDENTIALS_SECRET_ARN");
    for (const v of ["AUDIT_TOKEN_SECRET_ARN", "RELAY_SECRET_ARN"])
      expect(variablesOf("KubefnReconcile")).not.toHaveProperty(v);
  });

  it("without StatusSealKeySecretArn the stack makes a seal key of its own: on Lambda it is never missing (issue 30, Low)", () => {
    expect(template.Parameters.StatusSealKeySecretArn?.Default).toBe("");
    expect(template.Conditions.MakesStatusSealKey).toEqual(["StatusSealKeySecretArn", ""]);
    expect(template.Resources.StatusSealKey).toMatchObject({
      Type: "AWS::SecretsManager::Secret",
      Condition: "MakesStatusSealKey",
      Properties: { GenerateSecretString: { PasswordLength: 64, ExcludePunctuation: true } },
    });
    const sealKeyArn = ["MakesStatusSealKey", "StatusSealKey", "StatusSealKeySecretArn"];
    for (const fn of ["Kubefn", "KubefnReconcile"]) {
      expect(variablesOf(fn).STATUS_SEAL_KEY_SECRET_ARN).toEqual(sealKeyArn);
      expect(JSON.stringify(template.Resources[fn]?.Properties.Policies)).toContain(
        JSON.stringify(sealKeyArn),
      );
    }
  });

  it("the intake's own cluster credential is the intake's alone: the reconcile function is never told it (issue 30, Low)", () => {
    for (const p of ["IntakeKubeconfigSecretArn", "IntakeKubeGoogleCredentialsSecretArn"])
      expect(template.Parameters[p]?.Default).toBe("");
    const reconcile = JSON.stringify(template.Resources.KubefnReconcile?.Properties);
    expect(reconcile).not.toContain("IntakeKubeconfigSecretArn");
    expect(reconcile).not.toContain("IntakeKubeGoogleCredentialsSecretArn");
    // Each role is an output, for the EKS access entries (kubefn-eks:kubefn-intake, kubefn-eks:kubefn).
    expect((template as unknown as { Outputs: Record<string, { Value: unknown }> }).Outputs).toMatchObject({
      IntakeRoleArn: { Value: "KubefnRole.Arn" },
      ReconcileRoleArn: { Value: "KubefnReconcileRole.Arn" },
    });
  });

  it("no credential is a Parameter: no NoEcho Parameter is left", () => {
    const noEcho = Object.entries(template.Parameters).filter(([, p]) => (p as { NoEcho?: boolean }).NoEcho);
    expect(noEcho).toEqual([]);
    expect(template.Parameters).not.toHaveProperty("AuditToken");
    expect(template.Parameters).not.toHaveProperty("RelaySecret");
  });
});

describe("infra/aws/template.yaml: a flood on the public Function URL cannot starve the control loop", () => {
  type Fn = {
    Handler: string;
    ReservedConcurrentExecutions: unknown;
    FunctionUrlConfig?: unknown;
    Events?: Record<string, { Type: string }>;
  };
  const functions = Object.entries(template.Resources).filter(
    ([, r]) => r.Type === "AWS::Serverless::Function",
  );
  const intake = template.Resources.Kubefn?.Properties as Fn;
  const reconcile = template.Resources.KubefnReconcile?.Properties as Fn;

  it("two functions from one bundle: the intake and the reconcile entry points", () => {
    expect(functions.map(([name]) => name).sort()).toEqual(["Kubefn", "KubefnReconcile"]);
    expect([intake.Handler, reconcile.Handler]).toEqual(["index.intake", "index.reconcile"]);
  });

  it("each reserves instances of its own, from a Parameter of its own", () => {
    expect(intake.ReservedConcurrentExecutions).toBe("IntakeReservedConcurrency");
    expect(reconcile.ReservedConcurrentExecutions).toBe("ReconcileReservedConcurrency");
    expect(template.Parameters).not.toHaveProperty("ReservedConcurrency");
    for (const p of ["IntakeReservedConcurrency", "ReconcileReservedConcurrency"])
      expect(template.Parameters[p]).toMatchObject({ Type: "Number", MinValue: 1 });
  });

  it("only the intake has the Function URL, and it has no event source: no queue, no schedule, no log subscription", () => {
    expect(intake.FunctionUrlConfig).toEqual({ AuthType: "NONE" });
    expect(intake.Events).toBeUndefined();
    expect(reconcile.FunctionUrlConfig).toBeUndefined();
    expect(Object.values(reconcile.Events ?? {}).map((e) => e.Type)).toEqual(["SQS", "Schedule"]);
    const urlPermission = template.Resources.KubefnUrlInvokePermission?.Properties;
    expect(urlPermission).toMatchObject({ FunctionName: "Kubefn", InvokedViaFunctionUrl: true });
    // Nothing else may invoke the reconcile function from outside but CloudWatch Logs (and, on a
    // stack upgraded from 0.1.0 for one deploy, 0.1.0's rule).
    const permissions = Object.values(template.Resources).filter((r) => r.Type === "AWS::Lambda::Permission");
    expect(
      permissions.filter((p) => JSON.stringify(p.Properties.FunctionName).includes("KubefnReconcile")),
    ).toEqual([
      expect.objectContaining({ Properties: expect.objectContaining({ Principal: "events.amazonaws.com" }) }),
      expect.objectContaining({ Properties: expect.objectContaining({ Principal: "logs.amazonaws.com" }) }),
    ]);
  });
});
