import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENVELOPE_VERSION, isMessage, openEnvelope, sealed } from "./envelope.ts";
import type { Message } from "./types.ts";

const pass: Message = { request: { controller: "proxy", namespace: "ns", name: "a" }, attempt: 0 };
const job: Message = {
  request: { controller: "proxy", namespace: "", name: "__shard-probe-0" },
  attempt: 0,
  shard: { task: "probe", objects: [] },
};

describe("openEnvelope", () => {
  it.each([
    ["a pass without a version (releases up to 0.1.0)", pass, "pass"],
    ["a pass of this release", { ...pass, v: ENVELOPE_VERSION }, "pass"],
    ["a job (a probe shard)", job, "job"],
    ["a newer release's message", { ...pass, v: ENVELOPE_VERSION + 1 }, "newer"],
    [
      "a newer release's message of a shape this release cannot read",
      { v: ENVELOPE_VERSION + 1, work: 1 },
      "newer",
    ],
    ["a version that is not a positive integer", { ...pass, v: "2" }, "invalid"],
    ["version 0", { ...pass, v: 0 }, "invalid"],
    ["a job without objects", { ...job, shard: { task: "probe" } }, "invalid"],
    ["no attempt", { request: { controller: "proxy", name: "a" } }, "invalid"],
    ["no controller", { request: { name: "a" }, attempt: 0 }, "invalid"],
    [
      "a namespace that is not a string",
      { request: { controller: "proxy", name: "a", namespace: 3 }, attempt: 0 },
      "invalid",
    ],
    ["a string", "proxy/ns/a", "invalid"],
    ["null", null, "invalid"],
  ])("%s is a %s", (_what, body, kind) => {
    expect(openEnvelope(body).kind).toBe(kind);
  });

  it("says which version a newer release wrote", () => {
    expect(openEnvelope({ ...pass, v: 7 })).toEqual({ kind: "newer", version: 7 });
  });

  it.each(readdirSync(new URL("../../test/fixtures/messages/0.1.0/", import.meta.url)).map((file) => [file]))(
    "reads %s as the 0.1.0 release wrote it",
    (file) => {
      const body = JSON.parse(
        readFileSync(new URL(`../../test/fixtures/messages/0.1.0/${file}`, import.meta.url), "utf8"),
      ) as unknown;
      const envelope = openEnvelope(body);
      expect(envelope.kind).toBe(file.endsWith("-job.json") ? "job" : "pass");
      expect(isMessage(body)).toBe(true);
    },
  );
});

describe("sealed", () => {
  it("stamps the version and the sender's trace, keeping a trace the message already has", () => {
    const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    expect(sealed(pass, tp)).toEqual({ ...pass, v: ENVELOPE_VERSION, traceparent: tp });
    const own = { ...pass, traceparent: "00-11111111111111111111111111111111-2222222222222222-01" };
    expect(sealed(own, tp).traceparent).toBe(own.traceparent);
    expect(sealed(pass, undefined)).toEqual({ ...pass, v: ENVELOPE_VERSION });
  });
});
