import { describe, expect, it } from "vitest";
import { type KubeObject, ReconcileError } from "../../kube/index.ts";
import { applyErrorPolicy, type ErrorPolicy, isLatched } from "./error-policy.ts";
import { awaitSweep, failed, requeueAfter } from "./outcome.ts";

const now = new Date("2026-11-30T12:00:00Z");
const mine = (cls: "permanent" | "quota" | "transient", reason = "Refused") =>
  Object.assign(new ReconcileError(cls, reason, `${cls} says no`), { mine: true });
const notMine = (cls: "permanent" | "quota") => new ReconcileError(cls, "Forbidden", "the API said no");

const policy: ErrorPolicy = {
  concerns: (err) => (err as { mine?: boolean }).mine === true,
  latch: {
    condition: "Stuck",
    release: "drop",
    onLatch(object, error) {
      (object.status as Record<string, unknown>).phase = `Failed:${error.reason}`;
    },
  },
  quota: { condition: "Quota", reason: "QuotaExceeded", retrySeconds: 90 },
};

function object(generation: number, conditions: object[] = [], deleting = false): KubeObject {
  return {
    apiVersion: "x.dev/v1",
    kind: "Thing",
    metadata: { name: "t", generation, ...(deleting ? { deletionTimestamp: "2026-11-30T11:00:00Z" } : {}) },
    status: { conditions },
  };
}
const conditions = (o: KubeObject) =>
  (
    (
      o.status as {
        conditions?: { type: string; status: string; reason: string; observedGeneration?: number }[];
      }
    ).conditions ?? []
  ).map((c) => `${c.type}=${c.status}/${c.reason}@${c.observedGeneration ?? "-"}`);

describe("applyErrorPolicy", () => {
  it("latches a permanent error it concerns at the generation, then runs onLatch", () => {
    const o = object(3);
    applyErrorPolicy(policy, o, failed(mine("permanent", "Invalid")), now);
    expect(conditions(o)).toEqual(["Stuck=True/Invalid@3"]);
    expect(o.status).toMatchObject({ phase: "Failed:Invalid" });
    expect(isLatched(policy, o)).toBe(true);
  });

  it("writes nothing for errors it does not concern (the controller's own API calls)", () => {
    for (const err of [notMine("permanent"), notMine("quota")]) {
      const o = object(1);
      applyErrorPolicy(policy, o, failed(err), now);
      expect(conditions(o)).toEqual([]);
    }
  });

  it("sets the quota condition with the declared reason; a pass without an error drops it, an error keeps it", () => {
    const o = object(1);
    applyErrorPolicy(policy, o, failed(mine("quota", "ZoneResourcePoolExhausted")), now);
    expect(conditions(o)).toEqual(["Quota=True/QuotaExceeded@1"]);
    applyErrorPolicy(policy, o, failed(mine("transient")), now);
    expect(conditions(o)).toEqual(["Quota=True/QuotaExceeded@1"]);
    applyErrorPolicy(policy, o, requeueAfter(5), now);
    expect(conditions(o)).toEqual([]);
  });

  it("releases a latch from an older generation: dropped, or False/Resolved by default", () => {
    const old = { type: "Stuck", status: "True", reason: "Invalid", message: "", observedGeneration: 1 };
    const dropped = object(2, [old]);
    applyErrorPolicy(policy, dropped, awaitSweep(), now);
    expect(conditions(dropped)).toEqual([]);

    const resolved = object(2, [old]);
    applyErrorPolicy({ latch: { condition: "Stuck" } }, resolved, failed(mine("transient")), now);
    expect(conditions(resolved)).toEqual(["Stuck=False/Resolved@2"]);
  });

  it("keeps a latch at the current generation (a deleting object's finalizer pass does not release it)", () => {
    const o = object(
      2,
      [{ type: "Stuck", status: "True", reason: "Invalid", message: "", observedGeneration: 2 }],
      true,
    );
    expect(isLatched(policy, o)).toBe(false);
    applyErrorPolicy(policy, o, awaitSweep(), now);
    expect(conditions(o)).toEqual(["Stuck=True/Invalid@2"]);
  });

  it("without a latch a permanent error writes nothing; without a policy nothing at all", () => {
    const o = object(1);
    applyErrorPolicy({ quota: { condition: "Quota" } }, o, failed(mine("permanent")), now);
    applyErrorPolicy(undefined, o, failed(mine("quota")), now);
    expect(conditions(o)).toEqual([]);
  });
});
