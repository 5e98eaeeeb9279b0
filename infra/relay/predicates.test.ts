import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../shared/kube/port.ts";
import {
  and,
  created,
  deleted,
  deletionStarted,
  type Edge,
  generationChanged,
  not,
  or,
  payloadChanged,
  payloadChanges,
  readinessChanges,
  readinessOf,
  replaced,
  type Seen,
  seenOf,
  specChanges,
} from "./predicates.ts";

const base: Seen = { uid: "u1", generation: 1, deleting: false };
const update = (old: Partial<Seen>, seen: Partial<Seen>): Edge => ({
  type: "update",
  old: { ...base, ...old },
  seen: { ...base, ...seen },
});

describe("specChanges (primary and owned kinds)", () => {
  it.each<[string, Edge, boolean]>([
    ["create", { type: "create", seen: base }, true],
    ["delete", { type: "delete", seen: base }, true],
    ["generation bump (spec change)", update({ generation: 1 }, { generation: 2 }), true],
    ["status-only update (generation unchanged)", update({}, {}), false],
    ["deletion started", update({ deleting: false }, { deleting: true }), true],
    ["finalizer removed while deleting (no new edge)", update({ deleting: true }, { deleting: true }), false],
    ["recreated under the same name (uid changed)", update({ uid: "u1" }, { uid: "u2" }), true],
    [
      "kind without generation, label change",
      update({ generation: undefined }, { generation: undefined }),
      false,
    ],
    ["payload change on a spec kind is ignored", update({ payloadHash: "a" }, { payloadHash: "b" }), false],
  ])("%s → %s", (_name, edge, expected) => {
    expect(specChanges(edge)).toBe(expected);
  });
});

describe("payloadChanges (watched ConfigMap / Secret)", () => {
  const cm = (labels: Record<string, string>, data: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "c", namespace: "ns", uid: "u1", labels },
    data,
  });
  const edgeOf = (before: KubeObject, after: KubeObject): Edge => ({
    type: "update",
    old: seenOf(before, true),
    seen: seenOf(after, true),
  });

  it.each<[string, Edge, boolean]>([
    ["create", { type: "create", seen: seenOf(cm({}, { a: "1" }), true) }, true],
    ["delete", { type: "delete", seen: seenOf(cm({}, { a: "1" }), true) }, true],
    ["data changed", edgeOf(cm({}, { a: "1" }), cm({}, { a: "2" })), true],
    ["key added", edgeOf(cm({}, { a: "1" }), cm({}, { a: "1", b: "2" })), true],
    ["label-only change", edgeOf(cm({ x: "1" }, { a: "1" }), cm({ x: "2" }, { a: "1" })), false],
    ["same data, other key order", edgeOf(cm({}, { a: "1", b: "2" }), cm({}, { b: "2", a: "1" })), false],
    [
      "binaryData changed",
      edgeOf({ ...cm({}, {}), binaryData: { k: "AA==" } }, { ...cm({}, {}), binaryData: { k: "AQ==" } }),
      true,
    ],
    ["generation-like bump ignored", update({ generation: 1 }, { generation: 2 }), false],
  ])("%s → %s", (_name, edge, expected) => {
    expect(payloadChanges(edge)).toBe(expected);
  });
});

describe("combinators", () => {
  const edges: Edge[] = [
    { type: "create", seen: base },
    { type: "delete", seen: base },
    update({ generation: 1 }, { generation: 2 }),
    update({}, {}),
  ];
  it.each([
    ["and()", and(), [true, true, true, true]],
    ["or()", or(), [false, false, false, false]],
    ["or(created, deleted)", or(created, deleted), [true, true, false, false]],
    ["and(not(created), not(deleted))", and(not(created), not(deleted)), [false, false, true, true]],
    [
      "and(generationChanged, not(deletionStarted))",
      and(generationChanged, not(deletionStarted)),
      [false, false, true, false],
    ],
    [
      "not(or(replaced, payloadChanged, deletionStarted))",
      not(or(replaced, payloadChanged, deletionStarted)),
      [true, true, true, true],
    ],
  ] as const)("%s", (_name, predicate, expected) => {
    expect(edges.map(predicate)).toEqual(expected);
  });
});

describe("seenOf", () => {
  it("hashes the payload only for payload kinds and keeps no data", () => {
    const secret: KubeObject = {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s", uid: "u", deletionTimestamp: "2025-01-01T00:00:00Z" },
      data: { password: "aHVudGVyMg==" },
    };
    const seen = seenOf(secret, true);
    expect(seen).toEqual({ uid: "u", deleting: true, payloadHash: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(JSON.stringify(seen)).not.toContain("aHVudGVyMg");
    expect(seenOf(secret, false).payloadHash).toBeUndefined();
  });
});

describe("readinessChanges (owned kinds a controller takes readiness from; issue 33)", () => {
  const sts = (status: Record<string, unknown>, generation = 1): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "StatefulSet",
    metadata: { name: "pool-cpa-manager", namespace: "subpool-pool", uid: "u1", generation },
    spec: {
      replicas: 1,
      template: { spec: { containers: [{ name: "c", env: [{ name: "K", value: "v" }] }] } },
    },
    status,
  });
  const ready = {
    observedGeneration: 1,
    replicas: 1,
    readyReplicas: 1,
    availableReplicas: 1,
    updatedReplicas: 1,
  };
  const edge = (before: KubeObject, after: KubeObject): Edge => ({
    type: "update",
    old: seenOf(before, false, true),
    seen: seenOf(after, false, true),
  });

  it.each<[string, KubeObject, KubeObject, boolean]>([
    ["its ready replica lost", sts(ready), sts({ ...ready, readyReplicas: 0, availableReplicas: 0 }), true],
    ["its ready replica back", sts({ ...ready, readyReplicas: 0 }), sts(ready), true],
    [
      "a condition flips (Available)",
      sts({ ...ready, conditions: [{ type: "Available", status: "True" }] }),
      sts({ ...ready, conditions: [{ type: "Available", status: "False" }] }),
      true,
    ],
    [
      "a status write that moves only a timestamp or a revision hash",
      sts({
        ...ready,
        currentRevision: "a",
        conditions: [{ type: "Available", status: "True", lastUpdateTime: "t1" }],
      }),
      sts({
        ...ready,
        currentRevision: "b",
        conditions: [{ type: "Available", status: "True", lastUpdateTime: "t2" }],
      }),
      false,
    ],
    ["a spec change", sts(ready, 1), sts(ready, 2), true],
  ])("%s → %s", (_name, before, after, expected) => {
    expect(readinessChanges(edge(before, after))).toBe(expected);
  });

  it("keeps a few dozen bytes of the status, never the spec", () => {
    const seen = seenOf(sts(ready), false, true);
    expect(seen.readiness).toBe(readinessOf(sts(ready)));
    expect(JSON.stringify(seen)).not.toContain("env");
    expect(JSON.stringify(seen).length).toBeLessThan(120);
    expect(seenOf(sts(ready), false).readiness).toBeUndefined();
  });
});
