import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { clusterOf, type JobMessage, jobKey, messageKey, type PassMessage } from "../core/index.ts";
import { ENVELOPE_VERSION, isMessage, openEnvelope, sealed } from "./envelope.ts";
import { createMessageAuthenticator } from "./message-mac.ts";

const pass: PassMessage = { request: { controller: "proxy", namespace: "ns", name: "a" }, attempt: 0 };
const job: JobMessage = {
  kind: "job",
  v: ENVELOPE_VERSION,
  job: { controller: "proxy", task: "probe", slot: "0", objects: [] },
};
/**
 * A job as version 1 (the previous release, and 0.1.0 without `v`) wrote it: a pass with a shard.
 * The fixture is shared with the app's consume test (`shared/app/kubefn.test.ts`).
 */
const version1Job = JSON.parse(
  readFileSync(
    new URL("../../../test/fixtures/messages/envelope-v1/probe-shard-job.json", import.meta.url),
    "utf8",
  ),
) as {
  v: number;
  request: { controller: string; namespace: string; name: string };
  attempt: number;
  trigger: { kind: string; reason: string };
  shard: { task: string; objects: unknown[]; due: number };
};

describe("openEnvelope", () => {
  it.each([
    ["a pass without a version (releases up to 0.1.0)", pass, "pass"],
    ["a pass of this release", { ...pass, v: ENVELOPE_VERSION }, "pass"],
    ["a job (a probe shard)", job, "job"],
    ["a version-1 job (a pass-shaped message with a shard)", version1Job, "job"],
    ["a version-1 job without a version (0.1.0)", { ...version1Job, v: undefined }, "job"],
    ["a version-1 pass", { ...pass, v: 1 }, "pass"],
    ["a job of this version without its job", { kind: "job", v: ENVELOPE_VERSION }, "invalid"],
    ["a job in this version's shape without a version", { ...job, v: undefined }, "job"],
    ["a pass that says it is one", { ...pass, kind: "pass", v: ENVELOPE_VERSION }, "pass"],
    [
      "a job of this version whose objects are not a list",
      { ...job, job: { ...job.job, objects: "x" } },
      "invalid",
    ],
    ["a version-2 message that is a pass with a shard", { ...version1Job, v: 2 }, "pass"],
    ["a message of an unknown kind", { ...pass, v: ENVELOPE_VERSION, kind: "other" }, "invalid"],
    ["a newer release's message", { ...pass, v: ENVELOPE_VERSION + 1 }, "newer"],
    [
      "a newer release's message of a shape this release cannot read",
      { v: ENVELOPE_VERSION + 1, work: 1 },
      "newer",
    ],
    ["a version that is not a positive integer", { ...pass, v: "2" }, "invalid"],
    ["version 0", { ...pass, v: 0 }, "invalid"],
    ["a version-1 job without objects", { ...version1Job, shard: { task: "probe" } }, "invalid"],
    ["no attempt", { request: { controller: "proxy", name: "a" } }, "invalid"],
    ["no controller", { request: { name: "a" }, attempt: 0 }, "invalid"],
    [
      "a namespace that is not a string",
      { request: { controller: "proxy", name: "a", namespace: 3 }, attempt: 0 },
      "invalid",
    ],
    ["a pass of this release naming its cluster", { ...pass, v: ENVELOPE_VERSION, cluster: "east" }, "pass"],
    ["a job of this release naming its cluster", { ...job, cluster: "east" }, "job"],
    [
      "a version-2 pass naming a cluster (no release wrote one)",
      { ...pass, v: 2, cluster: "east" },
      "invalid",
    ],
    ["a version-2 job naming a cluster", { ...job, v: 2, cluster: "east" }, "invalid"],
    ["a version-1 pass naming a cluster", { ...pass, v: 1, cluster: "east" }, "invalid"],
    ["a cluster that is not a string", { ...pass, v: ENVELOPE_VERSION, cluster: 3 }, "invalid"],
    ["a string", "proxy/ns/a", "invalid"],
    ["null", null, "invalid"],
  ])("%s is a %s", (_what, body, kind) => {
    expect(openEnvelope(body).kind).toBe(kind);
  });

  it("reads the previous release's job (a `__shard-…` request with a shard) as the job it is", () => {
    expect(version1Job.request.name).toBe("__shard-probe-30-0");
    const envelope = openEnvelope({
      ...version1Job,
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      shard: {
        task: "probe",
        objects: [{ apiVersion: "v1", kind: "X", metadata: { name: "p" } }],
        data: [1],
        due: 5,
      },
      mac: ["v1.a", "v1.b"],
    });
    expect(envelope).toEqual({
      kind: "job",
      message: {
        kind: "job",
        v: 1,
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        job: {
          controller: "proxy",
          task: "probe",
          slot: "probe-30-0",
          objects: [{ apiVersion: "v1", kind: "X", metadata: { name: "p" } }],
          data: [1],
          due: 5,
        },
        mac: ["v1.a", "v1.b"],
      },
    });
    if (envelope.kind !== "job") throw new Error("not a job");
    expect(jobKey(envelope.message.job)).toBe("job:proxy/probe/probe-30-0");
  });

  it("keeps the MACs of the previous release's job valid: they never covered its request name", async () => {
    const mac = createMessageAuthenticator("k");
    const objects = [{ apiVersion: "v1", kind: "X", metadata: { name: "p" } }];
    const signed = await mac.sign({ ...job, job: { ...job.job, objects, due: 5 } });
    const old = { ...version1Job, shard: { task: "probe", objects, due: 5 }, mac: signed.mac };
    const envelope = openEnvelope(old);
    if (envelope.kind !== "job") throw new Error("not a job");
    expect(await mac.verify(envelope.message)).toBe(true);
    const forged = openEnvelope({ ...old, shard: { ...old.shard, objects: [{ ...objects[0], spec: 1 }] } });
    if (forged.kind !== "job") throw new Error("not a job");
    expect(await mac.verify(forged.message)).toBe(false);
  });

  it("says which version a newer release wrote", () => {
    expect(openEnvelope({ ...pass, v: 7 })).toEqual({ kind: "newer", version: 7 });
  });

  it.each(
    readdirSync(new URL("../../../test/fixtures/messages/0.1.0/", import.meta.url)).map((file) => [file]),
  )("reads %s as the 0.1.0 release wrote it", (file) => {
    const body = JSON.parse(
      readFileSync(new URL(`../../../test/fixtures/messages/0.1.0/${file}`, import.meta.url), "utf8"),
    ) as unknown;
    const envelope = openEnvelope(body);
    expect(envelope.kind).toBe(file.endsWith("-job.json") ? "job" : "pass");
    expect(isMessage(body)).toBe(true);
    if (envelope.kind === "job")
      expect(envelope.message.job).toMatchObject({ task: "probe", slot: "probe-30-0" });
  });
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

describe("a message's cluster (envelope version 3)", () => {
  it("is the default cluster's when it names none: every message of versions 1 and 2", () => {
    expect(clusterOf(pass)).toBe("default");
    expect(clusterOf({ ...pass, cluster: "east" })).toBe("east");
  });

  it("keys one object's name in two clusters apart, and the default's as before", () => {
    expect(messageKey(pass)).toBe("proxy/ns/a");
    expect(messageKey({ ...pass, cluster: "default" })).toBe("proxy/ns/a");
    expect(messageKey({ ...pass, cluster: "east" })).toBe("proxy/ns/a@east");
    expect(messageKey({ ...job, cluster: "east" })).toBe("job:proxy/probe/0@east");
    expect(messageKey({ ...pass, cluster: "east" })).not.toBe(messageKey({ ...pass, cluster: "west" }));
  });

  it("is under the MAC: a body signed for one cluster never verifies for another", async () => {
    const mac = createMessageAuthenticator("k".repeat(32));
    const objects = [{ apiVersion: "v1", kind: "X", metadata: { name: "p" } }];
    const east = await mac.sign({ ...job, cluster: "east", job: { ...job.job, objects } });
    expect(await mac.verify(east)).toBe(true);
    expect(await mac.verify({ ...east, cluster: "west" })).toBe(false);
    expect(await mac.verify({ ...east, cluster: undefined })).toBe(false);
    const follow = await mac.sign({
      ...pass,
      cluster: "east",
      trigger: { kind: "follow-up", reason: "waiting" },
    });
    expect(await mac.verify(follow)).toBe(true);
    expect(await mac.verify({ ...follow, cluster: "west" })).toBe(false);
  });
});
