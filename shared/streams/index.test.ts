import { describe, expect, it } from "vitest";
import { readTextCapped } from "./index.ts";

function streamOf(...parts: string[]): { stream: ReadableStream<Uint8Array>; cancelled: () => boolean } {
  let cancelled = false;
  const encoded = parts.map((p) => new TextEncoder().encode(p));
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = encoded.shift();
      if (next) controller.enqueue(next);
      else controller.close();
    },
    cancel() {
      cancelled = true;
    },
  });
  return { stream, cancelled: () => cancelled };
}

describe("readTextCapped", () => {
  it("joins the chunks as UTF-8 text, up to and including maxBytes", async () => {
    expect(await readTextCapped(streamOf("héllo ", "wörld").stream, 14)).toBe("héllo wörld");
  });

  it("cancels the stream and returns undefined past maxBytes", async () => {
    const s = streamOf("0123456789", "0123456789", "never read");
    expect(await readTextCapped(s.stream, 15)).toBeUndefined();
    expect(s.cancelled()).toBe(true);
  });
});
