import { describe, expect, it } from "vitest";
import { subPoolController } from "../../controllers/subpool/controller.ts";
import type { KubeObject } from "../../kube/port.ts";
import { mapEvents } from "../intake/index.ts";
import { generationChanged, type PredicateInput, payloadChanged } from "./predicates.ts";
import { createRegistry } from "./registry.ts";

const obj = (generation: number, resourceVersion = "7", extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Thing",
  metadata: { name: "a", generation, resourceVersion },
  ...extra,
});

describe("generationChanged (the seed's primary predicate)", () => {
  it.each<[string, PredicateInput, boolean]>([
    ["create", { verb: "create" }, true],
    ["delete (deletionTimestamp first appears)", { verb: "delete" }, true],
    [
      "update that bumped the generation (a spec edit)",
      { verb: "update", request: obj(1, "6"), object: obj(2) },
      true,
    ],
    [
      "update at the same generation (labels, or status through the main resource)",
      { verb: "update", request: obj(2, "6"), object: obj(2) },
      false,
    ],
    ["update without bodies (Metadata-level audit)", { verb: "update" }, true],
    [
      "merge patch of labels only",
      { verb: "patch", request: { metadata: { labels: { team: "x" } } } },
      false,
    ],
    [
      "merge patch of annotations and finalizers",
      { verb: "patch", request: { metadata: { annotations: { a: "b" }, finalizers: [] } } },
      false,
    ],
    ["merge patch of the spec", { verb: "patch", request: { spec: { suspend: true } } }, true],
    [
      "merge patch of spec and labels",
      { verb: "patch", request: { metadata: { labels: {} }, spec: {} } },
      true,
    ],
    [
      "JSON patch of a label",
      { verb: "patch", request: [{ op: "add", path: "/metadata/labels/team", value: "x" }] },
      false,
    ],
    [
      "JSON patch moving a spec field into metadata",
      { verb: "patch", request: [{ op: "move", from: "/spec/a", path: "/metadata/labels/a" }] },
      true,
    ],
    [
      "JSON patch of the spec",
      { verb: "patch", request: [{ op: "replace", path: "/spec/suspend", value: true }] },
      true,
    ],
    [
      "apply patch carrying the whole object",
      { verb: "patch", request: { apiVersion: "v1", kind: "Thing", metadata: { name: "a" }, spec: {} } },
      true,
    ],
    ["patch without a body (Metadata-level audit)", { verb: "patch" }, true],
    ["an empty patch", { verb: "patch", request: {} }, true],
  ])("%s → %s", (_, change, expected) => {
    expect(generationChanged(change)).toBe(expected);
  });
});

describe("payloadChanged (ManagedConfigPredicate)", () => {
  it.each<[string, PredicateInput, boolean]>([
    ["create", { verb: "create" }, true],
    ["delete", { verb: "delete" }, true],
    ["patch of data", { verb: "patch", request: { data: { k: "v" } } }, true],
    ["patch of binaryData", { verb: "patch", request: { binaryData: { k: "AA==" } } }, true],
    ["patch of labels only", { verb: "patch", request: { metadata: { labels: { x: "y" } } } }, false],
    [
      "update answered with the resourceVersion sent (nothing stored)",
      { verb: "update", request: obj(0, "9"), object: obj(0, "9") },
      false,
    ],
    ["update that stored something", { verb: "update", request: obj(0, "9"), object: obj(0, "10") }, true],
    ["update without bodies", { verb: "update" }, true],
  ])("%s → %s", (_, change, expected) => {
    expect(payloadChanged(change)).toBe(expected);
  });
});

describe("the SubPool predicate at intake", () => {
  const registry = createRegistry([subPoolController()]);
  const ctx = {
    kube: {} as never,
    log: { info() {}, warn() {}, error() {} },
    metrics: { count() {}, observe() {}, gauge() {} },
  };
  const pool = (generation: number, labels: Record<string, string> = {}) => ({
    apiVersion: "subrelay.example.com/v1alpha1",
    kind: "SubPool",
    metadata: { name: "demo", generation, resourceVersion: "12", labels },
  });
  const event = (verb: string, requestObject: unknown, responseObject: unknown) => ({
    level: "RequestResponse",
    stage: "ResponseComplete",
    verb,
    user: { username: "admin" },
    objectRef: {
      resource: "subpools",
      name: "demo",
      apiGroup: "subrelay.example.com",
      apiVersion: "v1alpha1",
    },
    responseStatus: { code: 200 },
    requestObject,
    responseObject,
  });
  const map = async (...items: unknown[]) =>
    (await mapEvents(ctx, registry, { kind: "EventList", apiVersion: "audit.k8s.io/v1", items })).requests;

  it("a label-only patch and a same-generation update cause no pass; a spec patch does", async () => {
    expect(
      await map(event("patch", { metadata: { labels: { team: "x" } } }, pool(1, { team: "x" }))),
    ).toEqual([]);
    expect(await map(event("update", pool(1), pool(1, { team: "y" })))).toEqual([]);
    expect(await map(event("patch", { spec: { suspend: true } }, pool(2)))).toEqual([
      { controller: "subpool", name: "demo" },
    ]);
  });
});
