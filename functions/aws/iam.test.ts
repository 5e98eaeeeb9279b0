/**
 * The function's own permissions, as infra/aws/template.yaml grants them, enforced by moto's
 * server with authentication on: every call the queue makes is SigV4-signed with the function's
 * keys (moto recomputes the signature) and is one of the actions the template grants; an action
 * it does not grant is denied, and a request signed with the wrong secret is refused.
 *
 * Caveats: moto evaluates IAM policies by action only (outside S3 every request's resource is
 * `*`), so the statements' resources are widened to `*` for moto; that the template scopes them
 * to the bus and the schedule group is read from the template text in the first test.
 */
import { readFileSync } from "node:fs";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import {
  AttachUserPolicyCommand,
  CreateAccessKeyCommand,
  CreatePolicyCommand,
  CreateUserCommand,
  IAMClient,
} from "@aws-sdk/client-iam";
import { ListSchedulesCommand, SchedulerClient } from "@aws-sdk/client-scheduler";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parse } from "yaml";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import { awsQueue } from "./queue.ts";

const ACCOUNT = "123456789012"; // moto's default account
const ROLE = `arn:aws:iam::${ACCOUNT}:role/kubefn-scheduler`;
const TARGET = `arn:aws:lambda:${REGION}:${ACCOUNT}:function:kubefn`;

interface Statement {
  Effect: string;
  Action: string;
  Resource: unknown;
  Condition?: unknown;
}

// CloudFormation's short tags (!GetAtt, !Sub, …) are kept as the plain values they tag.
const template = parse(readFileSync(new URL("../../infra/aws/template.yaml", import.meta.url), "utf8"), {
  logLevel: "error",
}) as { Resources: Record<string, { Properties?: { Policies?: ({ Statement?: Statement[] } | null)[] } }> };

/** The function's policy statements for the bus and the schedule group, as the template writes them. */
const queueStatements = Object.values(template.Resources)
  .flatMap((r) => (r.Properties?.Policies ?? []).flatMap((p) => p?.Statement ?? []))
  .filter((s) => s.Action.startsWith("events:") || s.Action.startsWith("scheduler:"));

let moto: Moto;
let aws: KubefnAws;
let keys: { accessKeyId: string; secretAccessKey: string };

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
  const iam = new IAMClient({ region: REGION, endpoint: moto.endpoint });
  await iam.send(new CreateUserCommand({ UserName: "kubefn-function" }));
  const statements = queueStatements.map((s) => ({ Effect: s.Effect, Action: s.Action, Resource: "*" }));
  const policy = await iam.send(
    new CreatePolicyCommand({
      PolicyName: "kubefn-function",
      PolicyDocument: JSON.stringify({ Version: "2012-10-17", Statement: statements }),
    }),
  );
  await iam.send(new AttachUserPolicyCommand({ UserName: "kubefn-function", PolicyArn: policy.Policy?.Arn }));
  const key = await iam.send(new CreateAccessKeyCommand({ UserName: "kubefn-function" }));
  keys = {
    accessKeyId: key.AccessKey?.AccessKeyId ?? "",
    secretAccessKey: key.AccessKey?.SecretAccessKey ?? "",
  };
  iam.destroy();
  // From here on moto checks every request's signature and the caller's policies.
  const on = await fetch(`${moto.endpoint}/moto-api/reset-auth`, { method: "POST", body: "0" });
  expect(on.status).toBe(200);
}, 30_000);
afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await moto?.close();
});

function queue(credentials: typeof keys, over: { eventBusName?: string; scheduleGroup?: string } = {}) {
  const config = { region: REGION, endpoint: moto.endpoint, credentials };
  return awsQueue({
    eventBridge: new EventBridgeClient(config),
    scheduler: new SchedulerClient(config),
    eventBusName: over.eventBusName ?? aws.eventBusName,
    scheduleGroup: over.scheduleGroup ?? aws.scheduleGroup,
    schedulerRoleArn: ROLE,
    targetArn: TARGET,
    clock: { now: () => new Date("2026-11-30T12:00:00Z") },
  });
}

/** moto answers a refused request in XML, which the JSON clients cannot parse: its HTTP status. */
function refusal(err: unknown): { status?: number } {
  return { status: (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode };
}

const message = { request: { controller: "proxy", namespace: "ns1", name: "p1" }, attempt: 0 };

describe("the function's IAM policy from infra/aws/template.yaml (moto, authentication on)", () => {
  it("the template grants PutEvents on the bus and CreateSchedule in the schedule group, nothing more", () => {
    expect(queueStatements).toEqual([
      { Effect: "Allow", Action: "events:PutEvents", Resource: "Bus.Arn" },
      {
        Effect: "Allow",
        Action: "scheduler:CreateSchedule",
        Resource:
          // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's !Sub, as written.
          "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*",
      },
    ]);
  });

  it("allows what the queue does: PutEvents on the bus, CreateSchedule in the group", async () => {
    await expect(queue(keys).send([message])).resolves.toBeUndefined();
    await expect(queue(keys).send([message], 30)).resolves.toBeUndefined();
  });

  it("denies what the template does not grant (the check can fail)", async () => {
    const scheduler = new SchedulerClient({ region: REGION, endpoint: moto.endpoint, credentials: keys });
    const err = await scheduler
      .send(new ListSchedulesCommand({ GroupName: aws.scheduleGroup }))
      .catch(refusal);
    expect(err).toEqual({ status: 403 });
    scheduler.destroy();
  });

  it("refuses a request signed with the wrong secret", async () => {
    // Change the last character to a different one (replacing it with a fixed "x" forged nothing
    // when the secret already ended in "x").
    const last = keys.secretAccessKey.slice(-1);
    const forged = {
      ...keys,
      secretAccessKey: `${keys.secretAccessKey.slice(0, -1)}${last === "x" ? "y" : "x"}`,
    };
    expect(forged.secretAccessKey).not.toBe(keys.secretAccessKey);
    const err = await queue(forged).send([message]).catch(refusal);
    expect(err).toEqual({ status: 403 });
    // The same call with the right secret goes through.
    await expect(queue(keys).send([message])).resolves.toBeUndefined();
  });
});
