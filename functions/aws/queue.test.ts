import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SchedulerClient } from "@aws-sdk/client-scheduler";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Message } from "../../shared/runtime/types.ts";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  REGION,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";
import {
  awsQueue,
  MAX_CALL_BYTES,
  MAX_ENTRY_MESSAGES,
  MAX_SHARD_BYTES,
  PutEventsError,
  scheduleName,
} from "./queue.ts";

// Against moto's server: PutEvents goes through the template's Reconcile rule to a queue standing in
// for the function; CreateSchedule is read back with GetSchedule.
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

let moto: Moto;
let aws: KubefnAws;
/** The PutEvents calls, as serialized for the wire: `{ entries, bytes }`. */
let putEventsCalls: { entries: number; bytes: number }[];

beforeAll(async () => {
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  moto = await startMoto();
  aws = await createKubefnAws(moto.endpoint);
}, 30_000);
afterAll(async () => {
  vi.unstubAllEnvs();
  aws?.close();
  await moto?.close();
});
beforeEach(() => {
  putEventsCalls = [];
});
afterEach(async () => {
  await aws.delivered();
  await aws.fire();
});

function queue(overrides: { eventBridge?: EventBridgeClient; scheduleGroup?: string } = {}) {
  const config = { region: REGION, endpoint: moto.endpoint };
  const eventBridge = new EventBridgeClient(config);
  eventBridge.middlewareStack.add(
    (next) => async (args) => {
      const request = args.request as { body?: string };
      const input = args.input as { Entries?: unknown[] };
      putEventsCalls.push({
        entries: input.Entries?.length ?? 0,
        bytes: Buffer.byteLength(request.body ?? ""),
      });
      return next(args);
    },
    { step: "finalizeRequest", name: "recordPutEvents" },
  );
  return awsQueue({
    eventBridge: overrides.eventBridge ?? eventBridge,
    scheduler: new SchedulerClient(config),
    eventBusName: aws.eventBusName,
    scheduleGroup: overrides.scheduleGroup ?? aws.scheduleGroup,
    schedulerRoleArn: ROLE,
    targetArn: TARGET,
    clock: { now: () => NOW },
  });
}

describe("immediate sends: EventBridge PutEvents, routed by the template's Reconcile rule", () => {
  it("puts one kubefn.reconcile entry on the bus; the function receives the messages in the envelope", async () => {
    await queue().send([message("p1"), message("p2", 3)]);
    expect(putEventsCalls).toEqual([{ entries: 1, bytes: expect.any(Number) }]);
    const [event, ...rest] = await aws.delivered();
    expect(rest).toEqual([]);
    expect(event).toMatchObject({ source: "kubefn", "detail-type": "kubefn.reconcile", region: REGION });
    expect(event?.detail).toEqual({ messages: [message("p1"), message("p2", 3)] });
  });

  it("packs 50 messages per entry and 10 entries per call", async () => {
    const many = Array.from({ length: 12 * MAX_ENTRY_MESSAGES - 1 }, (_, i) => message(`p${i}`));
    await queue().send(many);
    expect(putEventsCalls.map((c) => c.entries)).toEqual([10, 2]);
    const events = await aws.delivered();
    expect(events.map((e) => e.detail.messages.length)).toEqual([...Array(11).fill(50), 49]);
    expect(events.flatMap((e) => e.detail.messages)).toEqual(many);
  });

  it("keeps each call under 256 KB by splitting on bytes, and drops oversized snapshots", async () => {
    const big = Array.from({ length: 8 }, (_, i) => message(`p${i}`, 0, 50_000));
    await queue().send([...big, message("huge", 0, 100_000)]);
    expect(putEventsCalls.length).toBeGreaterThan(1);
    for (const call of putEventsCalls) expect(call.bytes).toBeLessThan(262_144);
    const sent = await aws.deliveredMessages();
    expect(sent.map((m) => m.request.name)).toEqual([...big.map((m) => m.request.name), "huge"]);
    expect(sent.at(-1)?.snapshot).toBeUndefined();
    expect(sent[0]?.snapshot).toBeDefined();
  });

  it("throws with the error codes when FailedEntryCount > 0", async () => {
    // moto accepts every entry kubefn builds; this answer is the service's under throttling.
    const throttled = {
      send: async () => ({
        FailedEntryCount: 1,
        Entries: [{ ErrorCode: "ThrottlingException", ErrorMessage: "Rate exceeded" }],
      }),
    } as unknown as EventBridgeClient;
    const sent = queue({ eventBridge: throttled }).send([message("p1")]);
    await expect(sent).rejects.toBeInstanceOf(PutEventsError);
    await expect(sent).rejects.toThrow(/rejected 1 of 1 entries \(ThrottlingException: Rate exceeded\)/);
  });

  it("sends nothing for no messages", async () => {
    await queue().send([]);
    await queue().send([], 30);
    expect(putEventsCalls).toEqual([]);
    expect(await aws.delivered()).toEqual([]);
    expect(await aws.schedules()).toEqual([]);
  });
});

describe("delayed sends: Scheduler CreateSchedule, read back with GetSchedule", () => {
  it("creates a one-time at() schedule that deletes itself and invokes the function with the event", async () => {
    await queue().send([message("p1", 2, 1000)], 30);
    const [held, ...rest] = await aws.schedules();
    expect(rest).toEqual([]);
    expect(held?.name).toBe(scheduleName([message("p1")], Math.ceil(NOW.getTime() / 1000) + 30));
    expect(held?.output).toMatchObject({
      GroupName: "kubefn",
      // 12:00:00.400 + 30 s, rounded up to the next whole second
      ScheduleExpression: "at(2026-11-30T12:00:31)",
      ScheduleExpressionTimezone: "UTC",
      FlexibleTimeWindow: { Mode: "OFF" },
      ActionAfterCompletion: "DELETE",
      State: "ENABLED",
      Target: { Arn: TARGET, RoleArn: ROLE },
    });
    expect(held?.input).toEqual({
      source: "kubefn",
      "detail-type": "kubefn.reconcile",
      detail: { messages: [message("p1", 2)] },
    });
    expect(await aws.delivered()).toEqual([]);
  });

  it("keeps the UID a delayed message was decided for (the snapshot goes)", async () => {
    await queue().send([{ ...message("p1", 1, 1000), uid: "uid-1", listedAt: 5 }], 30);
    const [held] = await aws.schedules();
    expect(held?.input.detail.messages).toEqual([{ ...message("p1", 1), uid: "uid-1" }]);
  });

  it("keeps a probe shard's objects and every message's trigger", async () => {
    const objects = [0, 1, 2].map((i) => message(`p${i}`, 0, 2000).snapshot!);
    const shard: Message = {
      request: { controller: "proxy", name: "__shard-probe-1796040000-0" },
      attempt: 0,
      trigger: { kind: "shard", reason: "probe" },
      shard: { task: "probe", objects },
    };
    const followUp: Message = { ...message("p9", 1, 1000), trigger: { kind: "follow-up" } };
    await queue().send([shard, followUp], 30);
    const [held] = await aws.schedules();
    expect(held?.input.detail.messages).toEqual([
      shard,
      { ...message("p9", 1), trigger: { kind: "follow-up" } },
    ]);
  });

  it("cuts a shard above MAX_SHARD_BYTES into schedules that each fit, every object in one", async () => {
    const objects = Array.from({ length: 12 }, (_, i) => message(`big${i}`, 0, 40_000).snapshot!);
    const shard: Message = {
      request: { controller: "proxy", name: "__shard-probe-1796040000-3" },
      attempt: 0,
      shard: { task: "probe", objects },
    };
    await queue().send([shard], 30);
    const held = await aws.schedules();
    expect(held.length).toBeGreaterThanOrEqual(3);
    for (const s of held)
      expect(Buffer.byteLength(s.output.Target?.Input ?? "")).toBeLessThan(MAX_CALL_BYTES);
    const pieces = held.flatMap((s) => s.input.detail.messages);
    expect(pieces.map((m) => m.request.name).sort()).toEqual(
      pieces.map((_, i) => `__shard-probe-1796040000-3-${i + 1}`).sort(),
    );
    expect(pieces.flatMap((m) => m.shard?.objects.map((o) => o.metadata.name)).sort()).toEqual(
      objects.map((o) => o.metadata.name).sort(),
    );
    expect(Math.max(...pieces.map((m) => Buffer.byteLength(JSON.stringify(m))))).toBeLessThanOrEqual(
      MAX_SHARD_BYTES,
    );
  });

  it("treats a ConflictException (the same follow-up already scheduled) as sent", async () => {
    await queue().send([message("p1")], 5);
    await expect(queue().send([message("p1", 1)], 5)).resolves.toBeUndefined();
    expect((await aws.schedules()).map((s) => s.name)).toEqual([
      scheduleName([message("p1")], Math.ceil(NOW.getTime() / 1000) + 5),
    ]);
  });

  it("throws on any other failure (moto answers a group it does not know with a server error)", async () => {
    const err = await queue({ scheduleGroup: "absent" })
      .send([message("p1")], 5)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).not.toBe("ConflictException");
    expect(await aws.schedules()).toEqual([]);
  });

  it("rounds fractional delays up and never schedules in the past", async () => {
    await queue().send([message("p1")], 0.2);
    expect((await aws.schedules())[0]?.expression).toBe("at(2026-11-30T12:00:01)");
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
