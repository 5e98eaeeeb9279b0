import { describe, expect, it } from "vitest";
import { keyedSemaphore } from "./keyed-semaphore.ts";

/** A call that runs until `release()`; `started` once it runs. */
function gate() {
  let release!: () => void;
  const done = new Promise<void>((r) => {
    release = r;
  });
  const call = {
    started: false,
    release,
    run: async () => {
      call.started = true;
      await done;
    },
  };
  return call;
}

const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

describe("keyedSemaphore", () => {
  it("holds each key to its limit while another key runs freely", async () => {
    const slots = keyedSemaphore(2);
    const a = [gate(), gate(), gate()];
    const b = gate();
    const all = [...a.map((g) => slots.run("a", g.run)), slots.run("b", b.run)];
    await settle();
    expect(a.map((g) => g.started)).toEqual([true, true, false]);
    expect(b.started).toBe(true);
    a[0]!.release();
    await settle();
    expect(a[2]!.started).toBe(true);
    for (const g of [...a, b]) g.release();
    await Promise.all(all);
  });

  it("a key's failing call frees its turn", async () => {
    const slots = keyedSemaphore(1);
    await expect(slots.run("a", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(slots.run("a", async () => 7)).resolves.toBe(7);
  });
});
