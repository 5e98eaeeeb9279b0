/**
 * The dead-letter alarm of both AWS templates — infra/aws/template.yaml and the release's
 * dist/aws/template.yaml (scripts/release/sam-template.ts builds it from the first) — made in
 * moto's server as CloudFormation makes it: the resource's Properties evaluated for a stack whose
 * `AlarmTopicArn` is an SNS topic the user made (test/support/sam-environment.ts), with the stack's
 * queues made in moto as the template makes them, then `PutMetricAlarm` with exactly those.
 * The alarm exists, watches the visible messages of the queue the reconcile queue's redrive
 * really moves a failing message into, fires on one (the queue holds 1, over its threshold), and
 * notifies the user's topic on alarm and on OK; without a topic it notifies nobody.
 *
 * moto does not evaluate alarms nor publish SQS's metrics: that the alarm changes state is
 * CloudWatch's part; which series it reads, and whom it tells, is the template's.
 */
import { readFileSync } from "node:fs";
import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { releaseTemplate } from "../../scripts/release/sam-template.ts";
import { cloudWatch, sns } from "../../test/support/aws-call.ts";
import { createKubefnAws, type Moto, REGION, startMoto, templateQueue } from "../../test/support/moto.ts";
import { resourceProperties } from "../../test/support/sam-environment.ts";

const base = readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8");
const templates: Array<[string, string]> = [
  ["infra/aws/template.yaml", base],
  ["dist/aws/template.yaml", releaseTemplate(base, { codeUri: "kubefn-aws.zip", version: "0.0.0-test" })],
];

interface Alarm {
  AlarmName: string;
  Namespace?: string;
  MetricName?: string;
  Dimensions?: Array<{ Name: string; Value: string }>;
  Statistic?: string;
  Threshold?: number;
  ComparisonOperator?: string;
  AlarmActions?: string[];
  OKActions?: string[];
}

let moto: Moto;
let aws: Awaited<ReturnType<typeof createKubefnAws>>;
let sqs: SQSClient;
let topicArn: string;
const queueArn = async (url: string) =>
  (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }))).Attributes
    ?.QueueArn as string;
const queueName = (url: string) => url.slice(url.lastIndexOf("/") + 1);

beforeAll(async () => {
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
  sqs = new SQSClient({
    region: REGION,
    endpoint: moto.endpoint,
    credentials: { accessKeyId: "AKIDKUBEFNTEST", secretAccessKey: "x" },
  });
  const created = await sns(moto.endpoint, "CreateTopic", { Name: "kubefn-pager" });
  topicArn = /<TopicArn>([^<]+)<\/TopicArn>/.exec(created)?.[1] as string;
  expect(topicArn).toMatch(/^arn:aws:sns:us-east-1:\d+:kubefn-pager$/);
}, 60_000);

afterAll(async () => {
  sqs?.destroy();
  await moto?.close();
});

/** The template's DeadLetterQueueAlarm for `overrides`, put into moto's CloudWatch, as described. */
async function madeAlarm(
  templateText: string,
  name: string,
  overrides: Record<string, string>,
): Promise<Alarm> {
  const { created, properties } = resourceProperties(templateText, "DeadLetterQueueAlarm", {
    stackName: "kubefn",
    overrides,
    resources: { ReconcileQueue: aws.queueUrl, DeadLetterQueue: aws.deadLetterQueueUrl },
    attributes: {
      "DeadLetterQueue.QueueName": queueName(aws.deadLetterQueueUrl),
      "DeadLetterQueue.Arn": await queueArn(aws.deadLetterQueueUrl),
    },
  });
  expect(created).toBe(true);
  await cloudWatch(moto.endpoint, "PutMetricAlarm", { AlarmName: name, ...properties });
  const { MetricAlarms } = await cloudWatch<{ MetricAlarms: Alarm[] }>(moto.endpoint, "DescribeAlarms", {
    AlarmNames: [name],
  });
  expect(MetricAlarms).toHaveLength(1);
  return MetricAlarms[0] as Alarm;
}

describe.each(templates)("%s: DeadLetterQueueAlarm in moto", (file, text) => {
  const slug = file.split("/")[0];

  it("watches the visible messages of the queue a failing reconcile message is moved to, and notifies the user's topic", async () => {
    const alarm = await madeAlarm(text, `${slug}-dlq-topic`, { AlarmTopicArn: topicArn });
    expect(alarm).toMatchObject({
      Namespace: "AWS/SQS",
      MetricName: "ApproximateNumberOfMessagesVisible",
      Statistic: "Maximum",
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      AlarmActions: [topicArn],
      OKActions: [topicArn],
    });
    expect(alarm.Dimensions).toEqual([{ Name: "QueueName", Value: queueName(aws.deadLetterQueueUrl) }]);

    // A reconcile message received maxReceiveCount times is moved by the redrive policy into the
    // queue the dimension names, where it counts over the threshold.
    const watched = alarm.Dimensions?.[0]?.Value as string;
    const before = await visible(aws.deadLetterQueueUrl);
    await sqs.send(new SendMessageCommand({ QueueUrl: aws.queueUrl, MessageBody: `{"crashes":"${slug}"}` }));
    for (let i = 0; i <= templateQueue.RedrivePolicy.maxReceiveCount; i++)
      await sqs.send(new ReceiveMessageCommand({ QueueUrl: aws.queueUrl, VisibilityTimeout: 0 }));
    expect(queueName(aws.deadLetterQueueUrl)).toBe(watched);
    const after = await visible(aws.deadLetterQueueUrl);
    expect(after).toBe(before + 1);
    expect(after).toBeGreaterThan(alarm.Threshold as number);
  });

  it("without AlarmTopicArn it notifies nobody", async () => {
    const alarm = await madeAlarm(text, `${slug}-dlq-quiet`, {});
    expect(alarm.AlarmActions ?? []).toEqual([]);
    expect(alarm.OKActions ?? []).toEqual([]);
  });

  it("refuses a topic that is not an SNS ARN (AllowedPattern), as CloudFormation would", () => {
    const { Parameters } = parse(text, { logLevel: "error" }) as {
      Parameters: Record<string, { AllowedPattern?: string }>;
    };
    const pattern = new RegExp(Parameters.AlarmTopicArn?.AllowedPattern as string);
    expect(pattern.test(topicArn)).toBe(true);
    expect(pattern.test("")).toBe(true);
    expect(pattern.test("https://hooks.example.com/pager")).toBe(false);
  });
});

async function visible(url: string): Promise<number> {
  const got = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["ApproximateNumberOfMessages"] }),
  );
  return Number(got.Attributes?.ApproximateNumberOfMessages);
}
