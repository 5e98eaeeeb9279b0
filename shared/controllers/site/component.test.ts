import { describe, expect, it } from "vitest";
import {
  type ClusterComponent,
  ComponentRegistryError,
  conditionOrder,
  disabled,
  failed,
  noSites,
  notReady,
  notReadyAfter,
  type Registry,
  type Result,
  reconciled,
  type SiteComponent,
  validateRegistry,
} from "./component.ts";

describe("Result constructors", () => {
  const boom = new Error("boom");
  it.each<[string, Result, Partial<Result>]>([
    ["reconciled", reconciled(), { ready: true, reason: "Reconciled", message: "component reconciled" }],
    ["disabled", disabled("off"), { ready: true, reason: "Disabled", message: "off" }],
    ["noSites", noSites("none"), { ready: true, reason: "NoSites", message: "none" }],
    ["notReady", notReady("Waiting", "not yet"), { ready: false, reason: "Waiting", message: "not yet" }],
    [
      "notReadyAfter",
      notReadyAfter("Polling", "again soon", 30),
      { ready: false, reason: "Polling", message: "again soon", requeueAfterSeconds: 30 },
    ],
    ["failed", failed(boom), { ready: false, reason: "ReconcileError", message: "boom", err: boom }],
    [
      "failed (non-Error)",
      failed("text"),
      { ready: false, reason: "ReconcileError", message: "text", err: "text" },
    ],
  ])("%s", (_name, result, expected) => {
    expect(result).toEqual(expected);
  });

  it.each([reconciled(), disabled("x"), noSites("x"), notReady("R", "x")])(
    "only failed carries an error and only notReadyAfter a requeue (%#)",
    (result) => {
      expect(result.err).toBeUndefined();
      expect(result.requeueAfterSeconds).toBeUndefined();
    },
  );
});

const cluster = (name: string, conditionType: string): ClusterComponent => ({
  name,
  conditionType,
  reconcile: async () => reconciled(),
});
const site = (name: string, conditionType: string): SiteComponent => ({
  name,
  conditionType,
  enabled: () => true,
  reconcile: async () => reconciled(),
  cleanup: async () => {},
});

describe("validateRegistry", () => {
  it.each<[string, Registry, RegExp]>([
    ["empty", { cluster: [], site: [] }, /no components registered/],
    [
      "duplicate name across lists",
      { cluster: [cluster("net", "NetReady")], site: [site("net", "OtherReady")] },
      /"net" is registered twice/,
    ],
    [
      "duplicate condition type across lists",
      { cluster: [cluster("net", "NetReady")], site: [site("metalman", "NetReady")] },
      /"NetReady" is published by both "net" and "metalman"/,
    ],
    [
      "duplicate condition type within a list",
      { cluster: [], site: [site("a", "AReady"), site("b", "AReady")] },
      /"AReady" is published by both "a" and "b"/,
    ],
    ["empty name", { cluster: [cluster("", "NetReady")], site: [] }, /empty name/],
    ["condition type not CamelCase", { cluster: [cluster("net", "net-ready")], site: [] }, /not CamelCase/],
  ])("rejects %s with one clear error", (_name, registry, message) => {
    expect(() => validateRegistry(registry)).toThrow(ComponentRegistryError);
    expect(() => validateRegistry(registry)).toThrow(message);
  });

  it("lists every problem at once", () => {
    try {
      validateRegistry({
        cluster: [cluster("net", "NetReady"), cluster("net", "NetReady")],
        site: [site("s", "bad type")],
      });
      expect.unreachable();
    } catch (err) {
      expect((err as ComponentRegistryError).problems).toHaveLength(3);
    }
  });

  it("accepts a valid registry", () => {
    expect(() =>
      validateRegistry({ cluster: [cluster("net", "NetReady")], site: [site("storage", "StorageReady")] }),
    ).not.toThrow();
  });
});

describe("conditionOrder", () => {
  it("is cluster components first, then Site components, each in registry order", () => {
    expect(
      conditionOrder({
        cluster: [cluster("net", "NetReady"), cluster("machina", "MachinaReady")],
        site: [site("metalman", "MetalmanReady"), site("storage", "StorageReady")],
      }),
    ).toEqual(["NetReady", "MachinaReady", "MetalmanReady", "StorageReady"]);
  });
});
