import { afterEach, describe, expect, it, vi } from "vitest";
import type { JobMessage } from "../core/index.ts";
import { createMessageAuthenticator } from "./message-mac.ts";

const objects = Array.from({ length: 10 }, (_, i) => ({
  apiVersion: "v1",
  kind: "X",
  metadata: { namespace: "ns", name: `p${i}` },
  spec: { n: i },
}));
const job: JobMessage = {
  kind: "job",
  v: 3,
  cluster: "east",
  job: { controller: "proxy", task: "probe", slot: "0-0", objects, due: 5 },
};

describe("a job's MACs", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("a job delivered as it was signed is checked with one HMAC, not one an object", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const signed = await mac.sign(job);
    const hmacs = vi.spyOn(crypto.subtle, "sign");
    expect(await mac.verify(signed)).toBe(true);
    expect(hmacs).toHaveBeenCalledTimes(1);
  });

  it("a piece cut from it after signing verifies by its objects' MACs", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const signed = (await mac.sign(job)) as JobMessage;
    const piece: JobMessage = {
      ...signed,
      job: { ...signed.job, slot: "0-0-2", objects: objects.slice(3, 7) },
    };
    expect(await mac.verify(piece)).toBe(true);
  });

  it("a job signed without the whole job's MAC (the previous release) still verifies", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const signed = (await mac.sign(job)) as JobMessage;
    const before: JobMessage = { ...signed, mac: (signed.mac as string[]).slice(0, -1) };
    expect(before.mac).toHaveLength(objects.length + 1);
    expect(await mac.verify(before)).toBe(true);
  });

  it("a changed, added or reordered object, another frame or another key never verifies", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const signed = (await mac.sign(job)) as JobMessage;
    const withObjects = (o: unknown[]) => ({ ...signed, job: { ...signed.job, objects: o } }) as JobMessage;
    expect(await mac.verify(withObjects([...objects.slice(0, 9), { ...objects[9]!, spec: { n: 99 } }]))).toBe(
      false,
    );
    expect(await mac.verify(withObjects([...objects, { ...objects[0]!, metadata: { name: "new" } }]))).toBe(
      false,
    );
    expect(await mac.verify({ ...signed, job: { ...signed.job, due: 6 } })).toBe(false);
    expect(await mac.verify({ ...signed, cluster: "west" })).toBe(false);
    expect(await createMessageAuthenticator("j".repeat(32)).verify(signed)).toBe(false);
    // Reordered, every object is still one it signed: as a cut piece would, it verifies.
    expect(await mac.verify(withObjects([...objects].reverse()))).toBe(true);
  });
});
