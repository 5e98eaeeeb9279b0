import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Message } from "../../shared/runtime/types.ts";
import {
  type AwsEndpoint,
  defaultAnswer,
  startAwsEndpoint,
  TEST_CREDENTIALS,
  type WireAnswer,
  type WireRequest,
} from "../../test/support/aws-endpoint.ts";
import { awsQueue, MAX_ENTRY_MESSAGES, PutEventsError, scheduleName } from "./queue.ts";

const NOW = new Date("2026-11-30T12:00:00.400Z");
const ROLE = "arn:aws:iam::111122223333:role/kubefn-scheduler";
const TARGET = "arn:aws:lambda:us-east-1:111122223333:function:kubefn";

const message = (name: string, attempt = 0, snapshotBytes = 0): Message => ({
  request: { controller: "proxy", namespace: "ns1", name },
  attempt,
  ...(snapshotBytes
    ? {
        snapshot: {
          apiVersion: "v1",
          kind: "X",
          metadata: { name, annotations: { pad: "x".repeat(snapshotBytes) } },
        },
      }
    : {}),
});

let endpoint: AwsEndpoint;
let answer: ((req: WireRequest) => WireAnswer) | undefined;

beforeEach(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  answer = undefined;
  endpoint = await startAwsEndpoint((req) => (answer ?? defaultAnswer)(req));
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await endpoint.close();
});

function queue() {
  const aws = { region: "us-east-1", endpoint: endpoint.url };
  return awsQueue({
    eventBridge: new EventBridgeClient(aws),
    scheduler: new SchedulerClient(aws),
    eventBusName: "kubefn",
    scheduleGroup: "kubefn",
    schedulerRoleArn: ROLE,
    targetArn: TARGET,
    clock: { now: () => NOW },
  });
}

describe("immediate sends: EventBridge PutEvents on the wire", () => {
  it("POSTs / as AWSEvents.PutEvents, JSON 1.1, SigV4-signed, one kubefn.reconcile entry", async () => {
    await queue().send([message("p1"), message("p2", 3)]);
    const [req, ...rest] = endpoint.requests;
    expect(rest).toEqual([]);
    expect(req?.method).toBe("POST");
    expect(req?.path).toBe("/");
    expect(req?.headers["x-amz-target"]).toBe("AWSEvents.PutEvents");
    expect(req?.headers["content-type"]).toBe("application/x-amz-json-1.1");
    expect(req?.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDKUBEFNTEST\/\d{8}\/us-east-1\/events\/aws4_request, SignedHeaders=[^,]*x-amz-target[^,]*, Signature=[0-9a-f]{64}$/,
    );
    expect(req?.headers["x-amz-date"]).toMatch(/^\d{8}T\d{6}Z$/);
    const entries = req?.json.Entries as Array<Record<string, string>>;
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      Source: "kubefn",
      DetailType: "kubefn.reconcile",
      EventBusName: "kubefn",
    });
    expect(JSON.parse(entries[0]?.Detail ?? "")).toEqual({ messages: [message("p1"), message("p2", 3)] });
  });

  it("packs 50 messages per entry and 10 entries per call", async () => {
    const many = Array.from({ length: 12 * MAX_ENTRY_MESSAGES - 1 }, (_, i) => message(`p${i}`));
    await queue().send(many);
    const calls = endpoint.putEvents().map((r) => r.json.Entries as Array<{ Detail: string }>);
    expect(calls.map((c) => c.length)).toEqual([10, 2]);
    const sent = calls.flat().flatMap((e) => (JSON.parse(e.Detail) as { messages: Message[] }).messages);
    expect(sent).toEqual(many);
  });

  it("keeps each call under 256 KB by splitting on bytes, and drops oversized snapshots", async () => {
    const big = Array.from({ length: 8 }, (_, i) => message(`p${i}`, 0, 50_000));
    await queue().send([...big, message("huge", 0, 100_000)]);
    const calls = endpoint.putEvents();
    expect(calls.length).toBeGreaterThan(1);
    for (const call of calls) expect(Buffer.byteLength(call.body)).toBeLessThan(262_144);
    const sent = calls
      .flatMap((c) => c.json.Entries as Array<{ Detail: string }>)
      .flatMap((e) => (JSON.parse(e.Detail) as { messages: Message[] }).messages);
    expect(sent.map((m) => m.request.name)).toEqual([...big.map((m) => m.request.name), "huge"]);
    expect(sent.at(-1)?.snapshot).toBeUndefined();
    expect(sent[0]?.snapshot).toBeDefined();
  });

  it("throws with the error codes when FailedEntryCount > 0", async () => {
    answer = () => ({
      status: 200,
      body: {
        FailedEntryCount: 1,
        Entries: [{ ErrorCode: "ThrottlingException", ErrorMessage: "Rate exceeded" }],
      },
    });
    const sent = queue().send([message("p1")]);
    await expect(sent).rejects.toBeInstanceOf(PutEventsError);
    await expect(sent).rejects.toThrow(/rejected 1 of 1 entries \(ThrottlingException: Rate exceeded\)/);
  });

  it("sends nothing for no messages", async () => {
    await queue().send([]);
    await queue().send([], 30);
    expect(endpoint.requests).toEqual([]);
  });
});

describe("delayed sends: Scheduler CreateSchedule on the wire", () => {
  it("POSTs /schedules/{Name} with a one-time at() schedule that deletes itself and invokes the function", async () => {
    await queue().send([message("p1", 2, 1000)], 30);
    const [req, ...rest] = endpoint.requests;
    expect(rest).toEqual([]);
    const name = scheduleName([message("p1")], Math.ceil(NOW.getTime() / 1000) + 30);
    expect(req?.method).toBe("POST");
    expect(req?.path).toBe(`/schedules/${name}`);
    expect(req?.headers["content-type"]).toBe("application/json");
    expect(req?.headers.authorization).toMatch(
      /Credential=AKIDKUBEFNTEST\/\d{8}\/us-east-1\/scheduler\/aws4_request/,
    );
    const body = req?.json as Record<string, unknown> & { Target: { Input: string } };
    expect(body).toMatchObject({
      GroupName: "kubefn",
      // 12:00:00.400 + 30 s, rounded up to the next whole second
      ScheduleExpression: "at(2026-11-30T12:00:31)",
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      Target: { Arn: TARGET, RoleArn: ROLE },
    });
    expect(typeof body.ClientToken).toBe("string");
    expect(JSON.parse(body.Target.Input)).toEqual({
      source: "kubefn",
      "detail-type": "kubefn.reconcile",
      detail: { messages: [message("p1", 2)] },
    });
  });

  it("keeps the UID a delayed message was decided for (the snapshot goes)", async () => {
    await queue().send([{ ...message("p1", 1, 1000), uid: "uid-1", listedAt: 5 }], 30);
    const body = endpoint.requests[0]?.json as { Target: { Input: string } };
    expect(JSON.parse(body.Target.Input).detail.messages).toEqual([{ ...message("p1", 1), uid: "uid-1" }]);
  });

  it("treats a 409 ConflictException (the same follow-up already scheduled) as sent", async () => {
    answer = () => ({
      status: 409,
      headers: { "x-amzn-errortype": "ConflictException" },
      body: { Message: "Schedule kubefn-x already exists." },
    });
    await expect(queue().send([message("p1")], 5)).resolves.toBeUndefined();
    expect(endpoint.createSchedules()).toHaveLength(1);
  });

  it("throws on other errors", async () => {
    answer = () => ({
      status: 400,
      headers: { "x-amzn-errortype": "ValidationException" },
      body: { Message: "The schedule expression is invalid." },
    });
    await expect(queue().send([message("p1")], 5)).rejects.toMatchObject({ name: "ValidationException" });
  });

  it("rounds fractional delays up and never schedules in the past", async () => {
    await queue().send([message("p1")], 0.2);
    expect(endpoint.createSchedules()[0]?.json.ScheduleExpression).toBe("at(2026-11-30T12:00:01)");
  });
});

describe("scheduleName", () => {
  it("is the same for the same keys and second, whatever the order or attempt", () => {
    const a = scheduleName([message("p1", 0), message("p2", 1)], 1_796_040_031);
    expect(scheduleName([message("p2", 5), message("p1", 0)], 1_796_040_031)).toBe(a);
    expect(scheduleName([message("p1")], 1_796_040_031)).not.toBe(a);
    expect(scheduleName([message("p1"), message("p2")], 1_796_040_032)).not.toBe(a);
    expect(a).toMatch(/^kubefn-[0-9a-f]{20}-1796040031$/);
    expect(a.length).toBeLessThanOrEqual(64);
  });
});
