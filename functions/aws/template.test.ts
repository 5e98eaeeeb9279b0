import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createOperators } from "../../functions/operators.ts";
import { eksAuditFilterPattern, MAX_FILTER_PATTERN_LENGTH } from "../../shared/audit-export/index.ts";

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
      // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation !Sub syntax
      Properties: { LogGroupName: "/aws/eks/${EksClusterName}/cluster", DestinationArn: "Kubefn.Arn" },
    });
  });

  it("lets only CloudWatch Logs of this account, for that log group, invoke the function", () => {
    expect(template.Resources.EksAuditLogPermission).toMatchObject({
      Type: "AWS::Lambda::Permission",
      Condition: "HasEksCluster",
      Properties: {
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
