import { describe, expect, it } from "vitest";
import type { HealthState } from "./state.ts";
import {
  decodeHealthState,
  encodeHealthState,
  HEALTH_ANNOTATION,
  healthStateOf,
  healthStatusPatch,
  storedHealthOf,
} from "./stored-state.ts";

const state: HealthState = {
  instance: "pod-a",
  verdict: true,
  consecOK: 2,
  consecFail: 0,
  reported: { healthy: true, latencyMs: 12, at: "2026-01-01T00:00:00.000Z" },
};

describe("encode/decode", () => {
  it("round-trips", () => {
    expect(decodeHealthState(encodeHealthState(state))).toStrictEqual(state);
  });

  it("is canonical: key order of the input does not matter", () => {
    const shuffled = {
      reported: { at: "2026-01-01T00:00:00.000Z", latencyMs: 12, healthy: true },
      consecFail: 0,
      consecOK: 2,
      verdict: true,
      instance: "pod-a",
    } as HealthState;
    expect(encodeHealthState(shuffled)).toBe(encodeHealthState(state));
  });

  it("is compact", () => {
    expect(encodeHealthState(state)).toBe(
      '{"instance":"pod-a","verdict":true,"consecOK":2,"consecFail":0,' +
        '"reported":{"healthy":true,"latencyMs":12,"at":"2026-01-01T00:00:00.000Z"}}',
    );
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["not JSON", "{nope"],
    ["JSON null", "null"],
    ["an array", "[]"],
    ["no instance", '{"consecOK":1,"consecFail":0}'],
    ["negative counter", '{"instance":"a","consecOK":-1,"consecFail":0}'],
    ["fractional counter", '{"instance":"a","consecOK":1.5,"consecFail":0}'],
    ["bad time", '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"at":"soon"}}'],
    [
      "unknown refusal",
      '{"instance":"a","consecOK":1,"consecFail":0,"refused":{"reason":"Nope","message":""}}',
    ],
    ["counter over its bound", '{"instance":"a","consecOK":1000001,"consecFail":0}'],
    ["a string counter", '{"instance":"a","consecOK":"1","consecFail":0}'],
    ["a verdict not a boolean", '{"instance":"a","verdict":"true","consecOK":1,"consecFail":0}'],
    ["empty instance", '{"instance":"","consecOK":1,"consecFail":0}'],
    ["reported not an object", '{"instance":"a","consecOK":1,"consecFail":0,"reported":true}'],
    ["reported without healthy", '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"latencyMs":3}}'],
    [
      "negative latency",
      '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"latencyMs":-1}}',
    ],
    [
      "no such day",
      '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"at":"2026-02-30T00:00:00Z"}}',
    ],
    [
      "no offset",
      '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"at":"2026-01-01T00:00:00"}}',
    ],
    ["samples 0", '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"samples":0}}'],
    ["samples 101", '{"instance":"a","consecOK":1,"consecFail":0,"reported":{"healthy":true,"samples":101}}'],
    [
      "refusal without a message",
      '{"instance":"a","consecOK":1,"consecFail":0,"refused":{"reason":"Loopback"}}',
    ],
    [
      "refusal reason from the prototype",
      '{"instance":"a","consecOK":1,"consecFail":0,"refused":{"reason":"toString","message":""}}',
    ],
  ])("garbage (%s) reads as no state", (_name, text) => {
    expect(decodeHealthState(text)).toBeUndefined();
  });

  it("reads every field it knows, with an offset time and a refusal", () => {
    const full: HealthState = {
      instance: "a",
      verdict: false,
      consecOK: 0,
      consecFail: 1_000_000,
      reported: { healthy: false, latencyMs: 0.5, at: "2026-01-01T01:00:00.5+02:00", samples: 100 },
      refused: { reason: "MetadataAddress", message: "169.254.169.254" },
    };
    expect(
      decodeHealthState(JSON.stringify({ ...full, reported: { ...full.reported, x: 1 } })),
    ).toStrictEqual(full);
  });

  it("ignores unknown fields", () => {
    expect(decodeHealthState('{"instance":"a","consecOK":1,"consecFail":0,"future":1}')).toEqual({
      instance: "a",
      consecOK: 1,
      consecFail: 0,
    });
  });

  it("reads from status.health, never from the tenant-writable annotation", () => {
    expect(healthStateOf({ health: encodeHealthState(state) })).toEqual(state);
    expect(healthStateOf(undefined)).toBeUndefined();
    const forged = { metadata: { annotations: { [HEALTH_ANNOTATION]: encodeHealthState(state) } } };
    expect(storedHealthOf(forged)).toBeUndefined();
    expect(storedHealthOf({ ...forged, status: { health: "x" } })).toBe("x");
  });
});

describe("healthStatusPatch", () => {
  it("is null when the stored value already says the same (steady state writes nothing)", () => {
    expect(healthStatusPatch(encodeHealthState(state), { ...state }, "42")).toBeNull();
  });

  it("is a resourceVersion-guarded merge patch of only status.health", () => {
    expect(healthStatusPatch(undefined, state, "42")).toEqual({
      type: "merge",
      body: { metadata: { resourceVersion: "42" }, status: { health: encodeHealthState(state) } },
    });
  });

  it("rewrites a garbage value", () => {
    expect(healthStatusPatch("{nope", state)).not.toBeNull();
  });
});
