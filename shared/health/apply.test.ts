import { describe, expect, it } from "vitest";
import { ConflictError } from "../kube/errors.ts";
import type { Kube, ObjectKey, Patch, Resource } from "../kube/port.ts";
import type { Message } from "../runtime/index.ts";
import { applyHealthSweep } from "./apply.ts";

const resource: Resource = {
  group: "crawl.kubefn.dev",
  version: "v1alpha1",
  resource: "proxies",
  kind: "Proxy",
  namespaced: true,
};
const patch: Patch = { type: "merge", body: { status: { health: "{}" } } };

describe("applyHealthSweep", () => {
  it("patches, then requests reconciles only for patches that landed", async () => {
    const patched: string[] = [];
    const kube = {
      async patchStatus(_res: Resource, key: ObjectKey) {
        if (key.name === "b") throw Object.create(ConflictError.prototype) as Error;
        if (key.name === "c") throw new Error("boom");
        patched.push(key.name);
        return { metadata: { name: key.name, resourceVersion: "2" } };
      },
    } as unknown as Kube;
    const sent: Message[][] = [];
    const queue = { send: async (m: Message[]) => void sent.push(m) };
    const keys = ["a", "b", "c", "d"].map((name) => ({ namespace: "ns", name }));
    const out = await applyHealthSweep({ kube, queue }, resource, "proxy", {
      statusPatches: keys.map((key) => ({ key, patch })),
      reconcileKeys: [keys[0]!, keys[1]!, keys[2]!],
    });
    expect(out).toEqual({
      written: 2,
      conflicts: 1,
      conflictKeys: [keys[1]],
      failed: 1,
      // What the API server returned for each landed patch: the next write of it starts there.
      stored: [keys[0], keys[3]].map((key) => ({
        key,
        object: { metadata: { name: key!.name, resourceVersion: "2" } },
      })),
      reconcilesRequested: 1,
      reconcilesLost: 0,
    });
    expect(patched.sort()).toEqual(["a", "d"]);
    expect(sent).toEqual([
      [
        {
          request: { controller: "proxy", namespace: "ns", name: "a" },
          attempt: 0,
          trigger: { kind: "drift", reason: "health-report" },
        },
      ],
    ]);
  });

  it("sends nothing when nothing changed", async () => {
    const sent: Message[][] = [];
    const out = await applyHealthSweep(
      { kube: {} as Kube, queue: { send: async (m) => void sent.push(m) } },
      resource,
      "proxy",
      { statusPatches: [], reconcileKeys: [] },
    );
    expect(out.reconcilesRequested).toBe(0);
    expect(sent).toEqual([]);
  });
});
