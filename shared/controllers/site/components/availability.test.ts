import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../../kube/index.ts";
import { availabilityResult, deploymentAvailability } from "./availability.ts";

const now = Date.parse("2026-12-02T12:00:00Z");
const ago = (seconds: number) => new Date(now - seconds * 1000).toISOString();

const deployment = (status: Record<string, unknown>, generation = 2, replicas = 2): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "machina", namespace: "kubefn-system", generation, creationTimestamp: ago(600) },
  spec: { replicas },
  status,
});
const rolledOut = { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 };

describe("deploymentAvailability (kstatus's Deployment rules)", () => {
  it.each([
    ["rolled out: this generation observed, every replica updated and available", rolledOut, "available"],
    ["no status yet (never observed)", {}, "progressing"],
    ["an older generation observed", { ...rolledOut, observedGeneration: 1 }, "progressing"],
    ["one replica not updated", { ...rolledOut, updatedReplicas: 1 }, "progressing"],
    ["one replica not available", { ...rolledOut, availableReplicas: 1 }, "progressing"],
    ["old replicas still terminating", { ...rolledOut, replicas: 3 }, "progressing"],
    [
      "past its progress deadline",
      {
        ...rolledOut,
        availableReplicas: 0,
        conditions: [
          { type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "x" },
        ],
      },
      "stalled",
    ],
  ])("%s → %s", (_what, status, state) => {
    expect(deploymentAvailability(deployment(status), now).state).toBe(state);
  });
});

describe("availabilityResult", () => {
  it("True with the replica count once available", () => {
    expect(availabilityResult(deployment(rolledOut), now)).toEqual({
      ready: true,
      reason: "Reconciled",
      message: "machina: 2/2 replicas available",
    });
  });

  it.each([
    [0, 5],
    [30, 15],
    [240, 120],
    [3600, 300],
  ])("progressing for %i s → re-checked after %i s", (seconds, after) => {
    const progressing = {
      ...rolledOut,
      availableReplicas: 1,
      conditions: [
        { type: "Progressing", status: "True", reason: "ReplicaSetUpdated", lastUpdateTime: ago(seconds) },
      ],
    };
    expect(availabilityResult(deployment(progressing), now)).toMatchObject({
      ready: false,
      reason: "DeploymentProgressing",
      message: "machina: 2/2 updated, 1/2 available",
      requeueAfterSeconds: after,
    });
  });

  it("stalled past its deadline: False without a re-check of its own", () => {
    const stalled = {
      conditions: [
        { type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "timed out" },
      ],
    };
    const result = availabilityResult(deployment(stalled), now);
    expect(result).toMatchObject({
      ready: false,
      reason: "DeploymentStalled",
      message: "machina: timed out",
    });
    expect(result.requeueAfterSeconds).toBeUndefined();
  });
});
