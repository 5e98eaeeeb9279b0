import { describe, expect, it } from "vitest";
import { classifyError } from "../../../kube/classify.ts";
import { nameFromUID, ProviderError } from "./provider.ts";

describe("nameFromUID", () => {
  it.each([
    ["3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6", "px-3f2a9c4e1b7d4e8f9a0b"],
    ["3F2A9C4E-1B7D-4E8F-9A0B-C1D2E3F4A5B6", "px-3f2a9c4e1b7d4e8f9a0b"],
  ])("%s → %s", (uid, name) => {
    expect(nameFromUID(uid)).toBe(name);
    // DNS-1123 label and GCE instance name rules at once.
    expect(name).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
  });

  it.each(["", "short", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"])("rejects %j", (uid) => {
    expect(() => nameFromUID(uid)).toThrow(ProviderError);
  });
});

describe("ProviderError", () => {
  it("is trusted by classifyError, also when wrapped", () => {
    const err = new ProviderError("quota", "QuotaExceeded", "CPUS", { retryAfterSeconds: 30 });
    expect(classifyError(err)).toEqual({ class: "quota", reason: "QuotaExceeded", retryAfterSeconds: 30 });
    expect(classifyError(new Error("pass failed", { cause: err }))).toMatchObject({ class: "quota" });
  });
});
