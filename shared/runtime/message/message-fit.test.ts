import { describe, expect, it } from "vitest";
import type { JobMessage, Message, PassMessage } from "../core/index.ts";
import {
  batchesOf,
  cutJob,
  ENVELOPE_HEADROOM_BYTES,
  fitToQueue,
  messageBytes,
  platformQueue,
} from "./message-fit.ts";
import { createMessageAuthenticator } from "./message-mac.ts";

const object = (i: number, pad: number) => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace: "ns", name: `p${i}`, annotations: { pad: "é".repeat(pad) } },
});

const shard = (n: number, pad: number, data?: unknown[]): JobMessage => ({
  kind: "job",
  job: {
    controller: "proxy",
    task: "probe",
    slot: "3-0",
    objects: Array.from({ length: n }, (_, i) => object(i, pad)),
    ...(data ? { data } : {}),
    due: 9,
  },
});

describe("fitToQueue", () => {
  it("leaves messages alone for a queue without a limit", () => {
    const big = shard(40, 3_000);
    expect(fitToQueue([big], undefined)).toEqual([big]);
  });

  it("cuts a shard above the limit into pieces within it (UTF-8 bytes, headroom kept), every object once, in order", () => {
    const big = shard(40, 1_600); // "é" is 2 bytes: ~3.2 KB an object
    const pieces = fitToQueue([big], 64_000);
    expect(pieces.length).toBeGreaterThanOrEqual(2);
    for (const p of pieces) expect(messageBytes(p)).toBeLessThanOrEqual(64_000 - ENVELOPE_HEADROOM_BYTES);
    const jobs = pieces.map((p) => p as JobMessage);
    expect(jobs.flatMap((p) => p.job.objects.map((o) => o.metadata.name))).toEqual(
      big.job.objects.map((o) => o.metadata.name),
    );
    expect(jobs.map((p) => p.job.slot)).toEqual(pieces.map((_, i) => `3-0-${i + 1}`));
    expect(jobs.every((p) => p.kind === "job" && p.job.due === 9)).toBe(true);
  });

  it("cuts a shard's per-object data (probe resumes) alongside its objects", () => {
    const data = Array.from({ length: 40 }, (_, i) => ({ at: i }));
    const pieces = cutJob(shard(40, 1_600, data), 40_000) as JobMessage[];
    expect(pieces.length).toBeGreaterThanOrEqual(2);
    for (const p of pieces) {
      const names = p.job.objects.map((o) => Number(o.metadata.name?.slice(1)));
      expect((p.job.data as { at: number }[]).map((d) => d.at)).toEqual(names);
    }
  });

  it("drops a pass's listed objects that would not fit, and keeps a small message as it is", () => {
    const small: PassMessage = { request: { controller: "proxy", namespace: "ns", name: "a" }, attempt: 0 };
    const big: PassMessage = { ...small, listed: [object(1, 100_000)], listedAt: 1, uid: "u" };
    expect(fitToQueue([small, big], 64_000)).toEqual([small, { ...small, uid: "u" }]);
  });

  it("regression: pieces fitted, then signed, are not cut again by the platform's queue (a cut breaks their MACs)", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const data = Array.from({ length: 300 }, (_, i) => ({ at: i }));
    // Small objects, many of them: the MAC tags (49 bytes an object) outweigh the headroom.
    const fittedPieces = fitToQueue([shard(300, 150, data)], 64_000);
    expect(fittedPieces.length).toBeGreaterThanOrEqual(2);
    const signed = await Promise.all(fittedPieces.map((p) => mac.sign({ ...p, v: 1 })));
    const sent = fitToQueue(signed, 64_000);
    expect(sent).toEqual(signed);
    for (const piece of sent) {
      expect(messageBytes(piece)).toBeLessThanOrEqual(64_000);
      expect(await mac.verify(piece)).toBe(true);
    }
  });
});

describe("platformQueue", () => {
  const pass = (name: string, pad = 0): PassMessage => ({
    request: { controller: "proxy", namespace: "ns", name },
    attempt: 0,
    ...(pad ? { listed: [object(0, pad)], listedAt: 1 } : {}),
  });
  const recording = (limits: Parameters<typeof platformQueue>[0]) => {
    const calls: { batch: Message[]; delaySeconds: number | undefined }[] = [];
    const queue = platformQueue(
      limits,
      async (batch, delaySeconds) => void calls.push({ batch, delaySeconds }),
    );
    return { queue, calls };
  };

  it("hands the platform batches within its counts and bytes, in order, with the delay as given", async () => {
    const { queue, calls } = recording({
      maxMessageBytes: 64_000,
      maxBatchMessages: 10,
      maxBatchBytes: 1_000_000,
    });
    const all = Array.from({ length: 25 }, (_, i) => pass(`p${i}`));
    await queue.send(all, 7.5);
    expect(calls.map((c) => c.batch.length)).toEqual([10, 10, 5]);
    expect(calls.flatMap((c) => c.batch)).toEqual(all);
    expect(calls.every((c) => c.delaySeconds === 7.5)).toBe(true);
  });

  it("cuts a job and drops a pass's listed objects above the pass limit before batching", async () => {
    const { queue, calls } = recording({
      maxMessageBytes: 100_000,
      maxPassBytes: 20_000,
      maxBatchMessages: 10,
      maxBatchBytes: 200_000,
    });
    await queue.send([shard(60, 1_600), pass("listed", 15_000)]);
    const sent = calls.flatMap((c) => c.batch);
    for (const c of calls)
      expect(c.batch.reduce((n, m) => n + messageBytes(m), 0)).toBeLessThanOrEqual(200_000);
    expect(sent.filter((m) => m.kind === "job").length).toBeGreaterThanOrEqual(2);
    expect(sent.find((m) => m.kind !== "job")).toEqual(pass("listed"));
  });
});

describe("batchesOf", () => {
  it.each([
    [[1, 1, 1, 1, 1], 2, 100, [[1, 1], [1, 1], [1]]],
    [[40, 40, 40], 10, 100, [[40, 40], [40]]],
    [[150, 1], 10, 100, [[150], [1]]],
    [[], 10, 100, []],
  ])("%j by %i and %i bytes → %j", (items, maxCount, maxBytes, expected) => {
    expect(batchesOf(items, maxCount, maxBytes, (n) => n)).toEqual(expected);
  });
});
