import { describe, expect, it } from "vitest";
import { cutShard, ENVELOPE_HEADROOM_BYTES, fitToQueue, messageBytes } from "./message-fit.ts";
import { createMessageAuthenticator } from "./message-mac.ts";
import type { Message } from "./types.ts";

const object = (i: number, pad: number) => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace: "ns", name: `p${i}`, annotations: { pad: "é".repeat(pad) } },
});

const shard = (n: number, pad: number, data?: unknown[]): Message => ({
  request: { controller: "proxy", name: "__shard-probe-3-0" },
  attempt: 0,
  trigger: { kind: "shard", reason: "probe" },
  shard: {
    task: "probe",
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
    expect(pieces.flatMap((p) => p.shard?.objects.map((o) => o.metadata.name))).toEqual(
      big.shard?.objects.map((o) => o.metadata.name),
    );
    expect(pieces.map((p) => p.request.name)).toEqual(pieces.map((_, i) => `__shard-probe-3-0-${i + 1}`));
    expect(pieces.every((p) => p.shard?.due === 9)).toBe(true);
  });

  it("cuts a shard's per-object data (probe resumes) alongside its objects", () => {
    const data = Array.from({ length: 40 }, (_, i) => ({ at: i }));
    const pieces = cutShard(shard(40, 1_600, data), 40_000);
    expect(pieces.length).toBeGreaterThanOrEqual(2);
    for (const p of pieces) {
      const names = p.shard?.objects.map((o) => Number(o.metadata.name?.slice(1)));
      expect((p.shard!.data as { at: number }[]).map((d) => d.at)).toEqual(names);
    }
  });

  it("drops a pass's listed objects that would not fit, and keeps a small message as it is", () => {
    const small: Message = { request: { controller: "proxy", namespace: "ns", name: "a" }, attempt: 0 };
    const big: Message = { ...small, listed: [object(1, 100_000)], listedAt: 1, uid: "u" };
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
