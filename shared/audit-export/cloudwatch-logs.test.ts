import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  auditItemsOf,
  CloudWatchLogsDecodeError,
  decodeCloudWatchLogs,
  encodeCloudWatchLogs,
  isCloudWatchLogsEvent,
} from "./index.ts";

const fixture = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../test/fixtures/eks/${name}`, import.meta.url), "utf8")) as {
    awslogs: { data: string };
  };
const MiB = 1 << 20;

describe("CloudWatch Logs subscription deliveries (EKS audit log)", () => {
  it("decodes a DATA_MESSAGE batch gzipped by zlib into its log events, in order", async () => {
    const decoded = await decodeCloudWatchLogs(fixture("subscription-batch.json").awslogs.data, MiB);
    const expected = JSON.parse(
      readFileSync(
        new URL("../../test/fixtures/eks/subscription-batch.decoded.json", import.meta.url),
        "utf8",
      ),
    );
    expect(decoded).toEqual({
      messageType: "DATA_MESSAGE",
      logGroup: "/aws/eks/prod/cluster",
      logStream: expected.logStream,
      logEvents: expected.logEvents,
    });
    expect(decoded.logEvents).toHaveLength(8);
  });

  it("reads each message as an audit Event; a line that is not JSON stays a string (skipped by the mapping)", async () => {
    const items = auditItemsOf(
      await decodeCloudWatchLogs(fixture("subscription-batch.json").awslogs.data, MiB),
    );
    expect(items.slice(0, 7)).toEqual(
      items.slice(0, 7).map(() => expect.objectContaining({ kind: "Event", stage: "ResponseComplete" })),
    );
    expect(typeof items[7]).toBe("string");
  });

  it("a CONTROL_MESSAGE decodes with its type (no audit events)", async () => {
    const decoded = await decodeCloudWatchLogs(fixture("control-message.json").awslogs.data, MiB);
    expect(decoded.messageType).toBe("CONTROL_MESSAGE");
  });

  it("what it encodes, zlib gunzips (the platform's format both ways)", async () => {
    const data = {
      messageType: "DATA_MESSAGE",
      logGroup: "g",
      logEvents: [{ id: "1", timestamp: 1, message: "m" }],
    };
    const encoded = await encodeCloudWatchLogs(data);
    expect(
      JSON.parse((await import("node:zlib")).gunzipSync(Buffer.from(encoded, "base64")).toString()),
    ).toEqual(data);
    expect(await decodeCloudWatchLogs(encoded, MiB)).toEqual(data);
  });

  it.each([
    ["not base64", "%%%"],
    ["base64 but not gzip", fixture("not-gzip.json").awslogs.data],
    ["gzip but not JSON", gzipSync("not json").toString("base64")],
    [
      "JSON without a known messageType",
      gzipSync(JSON.stringify({ messageType: "X", logGroup: "g", logEvents: [] })).toString("base64"),
    ],
    [
      "logEvents not an array",
      gzipSync(JSON.stringify({ messageType: "DATA_MESSAGE", logGroup: "g" })).toString("base64"),
    ],
  ])("%s → CloudWatchLogsDecodeError", async (_what, data) => {
    await expect(decodeCloudWatchLogs(data, MiB)).rejects.toBeInstanceOf(CloudWatchLogsDecodeError);
  });

  it("a delivery that decompresses beyond the cap is refused before it is all in memory (gzip bomb)", async () => {
    const bomb = gzipSync(
      JSON.stringify({
        messageType: "DATA_MESSAGE",
        logGroup: "g",
        logEvents: [{ message: "x".repeat(4 * MiB) }],
      }),
    );
    expect(bomb.length).toBeLessThan(64 * 1024);
    await expect(decodeCloudWatchLogs(bomb.toString("base64"), MiB)).rejects.toThrow(
      /more than 1048576 bytes/,
    );
  });

  it.each([
    [{ awslogs: { data: "H4sI" } }, true],
    [{ awslogs: {} }, false],
    [{ awslogs: null }, false],
    [{ source: "aws.events" }, false],
    [null, false],
  ])("isCloudWatchLogsEvent(%j) → %s", (event, expected) => {
    expect(isCloudWatchLogsEvent(event)).toBe(expected);
  });
});
