/**
 * infra/aws/template.yaml's alarms against what the code emits: each alarm on kubefn's own
 * namespace must name a metric (namespace, name and dimension set) that real passes write as EMF
 * through the Lambda's metrics, so renaming a metric or a label fails here, not silently in
 * CloudWatch; each alarm on an AWS namespace must name this stack's function or queue.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createKubefn } from "../../shared/app/index.ts";
import { createRegistry, done } from "../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../../test/support/fake-kube.ts";
import { ProxyResource, proxyController } from "../../test/unit/runtime/controllers.ts";
import { parseAwsEnv } from "./config.ts";
import { createEmfMetrics, EMF_NAMESPACE } from "./telemetry.ts";

interface Alarm {
  Type: string;
  Properties: {
    Namespace?: string;
    MetricName?: string;
    Dimensions?: { Name: string; Value: unknown }[];
    Metrics?: { Id: string; Expression?: string; Period?: number; ReturnData?: boolean }[];
    AlarmActions?: unknown;
    OKActions?: unknown;
    Threshold: number;
    ComparisonOperator: string;
  };
}

// CloudFormation's short tags (!Ref, !GetAtt, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as { Parameters: Record<string, { Default?: string }>; Resources: Record<string, Alarm> };
const alarms = Object.entries(template.Resources).filter(([, r]) => r.Type === "AWS::CloudWatch::Alarm");

/** `namespace|name|dimension,…` of every metric the EMF documents in `lines` define. */
function definedMetrics(lines: string[]): Set<string> {
  const out = new Set<string>();
  for (const line of lines) {
    const doc = JSON.parse(line) as {
      _aws: {
        CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[];
      };
    };
    for (const d of doc._aws.CloudWatchMetrics)
      for (const dims of d.Dimensions)
        for (const m of d.Metrics) out.add(metricKey(d.Namespace, m.Name, dims));
  }
  return out;
}
const metricKey = (namespace: string, name: string, dimensions: readonly string[]) =>
  `${namespace}|${name}|${[...dimensions].sort().join(",")}`;

/** What one Lambda invocation writes when a pass fails and another succeeds: the real executor. */
async function emittedByPasses(): Promise<Set<string>> {
  const lines: string[] = [];
  const metrics = createEmfMetrics({ write: (line) => lines.push(line) });
  const kube = new FakeKube();
  for (const name of ["fails", "converges"])
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name, namespace: "ns1", uid: `uid-${name}`, generation: 1 },
      spec: {},
    });
  const { ctx } = fakeContext(kube);
  const settings = parseAwsEnv({
    AWS_REGION: "us-east-1",
    // Never called here: the queue is a fake, or nothing is enqueued.
    QUEUE_URL: "http://127.0.0.1:9/123456789012/kubefn-reconcile",
    KUBECONFIG_BASE64: Buffer.from("apiVersion: v1\nkind: Config\n").toString("base64"),
  });
  const controller = proxyController({
    reconcile: async (_ctx, proxy) => {
      if (proxy.metadata.name === "fails") throw new Error("the provider answered 503");
      return done();
    },
  });
  const kubefn = createKubefn(
    settings,
    { kube, queue: ctx.queue, prober: { probe: async () => ({ ok: true }) } as never, log: ctx.log, metrics },
    { registry: createRegistry([controller]), sweepTasks: [] },
  );
  const pass = (name: string) => ({
    body: { request: { controller: "proxy", namespace: "ns1", name }, attempt: 0 },
  });
  const verdicts = await kubefn.consume([pass("fails"), pass("converges")]);
  expect(verdicts).toMatchObject([{ pass: { result: "error" } }, { pass: { result: "done" } }]);
  metrics.flush();
  return definedMetrics(lines);
}

/** The kubefn metric an alarm reads: its MetricName and Dimensions, or a Metrics Insights query's. */
function kubefnMetricOf(alarm: Alarm): string | undefined {
  const p = alarm.Properties;
  if (p.Namespace === EMF_NAMESPACE)
    return metricKey(
      p.Namespace,
      p.MetricName ?? "",
      (p.Dimensions ?? []).map((d) => d.Name),
    );
  const query = p.Metrics?.map((m) => m.Expression ?? "").find((e) => e.startsWith("SELECT"));
  if (!query) return undefined;
  const m = /^SELECT (?:SUM|AVG|MIN|MAX|COUNT)\((\w+)\) FROM SCHEMA\(("?)([\w/]+)\2((?:, *\w+)*)\)$/.exec(
    query,
  );
  if (!m) throw new Error(`a Metrics Insights query this test cannot read: ${query}`);
  const dims = (m[4] ?? "")
    .split(",")
    .map((d) => d.trim())
    .filter(Boolean);
  return metricKey(m[3] as string, m[1] as string, dims);
}

describe("infra/aws/template.yaml: the alarms", () => {
  it("are the six the functions need", () => {
    expect(alarms.map(([name]) => name).sort()).toEqual([
      "DeadLetterQueueAlarm",
      "ErrorsAlarm",
      "IntakeErrorsAlarm",
      "IntakeThrottlesAlarm",
      "PassesFailingAlarm",
      "ThrottlesAlarm",
    ]);
  });

  it("each kubefn alarm reads a metric the passes write (namespace, name and dimensions)", async () => {
    const emitted = await emittedByPasses();
    const read = alarms.map(([, a]) => kubefnMetricOf(a)).filter((k) => k !== undefined);
    expect(read).toEqual(["kubefn|controller_runtime_reconcile_errors_total|controller"]);
    for (const key of read) expect(emitted, key).toContain(key);
  });

  it("a renamed metric or dimension would fail the check (the check can fail)", async () => {
    const emitted = await emittedByPasses();
    const failing = template.Resources.PassesFailingAlarm as Alarm;
    const renamed = (expression: string): Alarm => ({
      ...failing,
      Properties: { ...failing.Properties, Metrics: [{ Id: "errors", Expression: expression }] },
    });
    for (const expression of [
      "SELECT SUM(controller_runtime_reconcile_error_total) FROM SCHEMA(kubefn, controller)",
      "SELECT SUM(controller_runtime_reconcile_errors_total) FROM SCHEMA(kubefn, controller, name)",
      "SELECT SUM(controller_runtime_reconcile_errors_total) FROM SCHEMA(kubefn_v2, controller)",
    ])
      expect(emitted).not.toContain(kubefnMetricOf(renamed(expression)));
  });

  it("the AWS metrics are this stack's: the dead-letter queue, each function", () => {
    const aws = Object.fromEntries(
      alarms
        .filter(([, a]) => a.Properties.Namespace?.startsWith("AWS/"))
        .map(([name, a]) => [
          name,
          [a.Properties.Namespace, a.Properties.MetricName, a.Properties.Dimensions],
        ]),
    );
    expect(aws).toEqual({
      DeadLetterQueueAlarm: [
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        [{ Name: "QueueName", Value: "DeadLetterQueue.QueueName" }],
      ],
      ErrorsAlarm: ["AWS/Lambda", "Errors", [{ Name: "FunctionName", Value: "KubefnReconcile" }]],
      ThrottlesAlarm: ["AWS/Lambda", "Throttles", [{ Name: "FunctionName", Value: "KubefnReconcile" }]],
      // The intake's apart: a flood on the Function URL throttles the intake, not the control loop.
      IntakeErrorsAlarm: ["AWS/Lambda", "Errors", [{ Name: "FunctionName", Value: "Kubefn" }]],
      IntakeThrottlesAlarm: ["AWS/Lambda", "Throttles", [{ Name: "FunctionName", Value: "Kubefn" }]],
    });
    for (const fn of ["Kubefn", "KubefnReconcile"])
      expect(template.Resources[fn]?.Properties).toMatchObject({
        DeadLetterQueue: { TargetArn: "DeadLetterQueue.Arn" },
      });
  });

  it("each fires above zero and notifies the optional SNS topic", () => {
    expect(template.Parameters.AlarmTopicArn?.Default).toBe("");
    for (const [name, a] of alarms) {
      expect([name, a.Properties.Threshold, a.Properties.ComparisonOperator]).toEqual([
        name,
        0,
        "GreaterThanThreshold",
      ]);
      for (const actions of [a.Properties.AlarmActions, a.Properties.OKActions])
        expect(actions).toEqual(["HasAlarmTopic", ["AlarmTopicArn"], "AWS::NoValue"]);
    }
  });
});
