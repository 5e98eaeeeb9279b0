import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../../kube/index.ts";
import { managedByTagKey, ownerTagKey, ownerTags } from "../providers/provider.ts";
import { type AgedInstance, findOrphans } from "./find-orphans.ts";

const now = new Date("2026-11-30T12:00:00Z");
const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
const proxies: Pick<KubeObject, "metadata">[] = [{ metadata: { name: "live", uid: "uid-live" } }];

function inst(id: string, tags: Record<string, string>, extra: Partial<AgedInstance> = {}): AgedInstance {
  return { id, state: "Running", tags, createdAt: ago(3600), ...extra };
}

describe("findOrphans", () => {
  it.each<[string, AgedInstance, number, boolean]>([
    ["owner exists", inst("a", ownerTags("uid-live"), { createdAt: ago(9999) }), 600, false],
    ["owner gone, past grace", inst("a", ownerTags("uid-gone"), { createdAt: ago(601) }), 600, true],
    ["owner gone, exactly at grace", inst("a", ownerTags("uid-gone"), { createdAt: ago(600) }), 600, true],
    ["owner gone, within grace", inst("a", ownerTags("uid-gone"), { createdAt: ago(599) }), 600, false],
    ["owner gone, grace 0, just created", inst("a", ownerTags("uid-gone"), { createdAt: ago(0) }), 0, true],
    ["owner gone, age unknown: never", inst("a", ownerTags("uid-gone"), { createdAt: undefined }), 0, false],
    [
      "owner gone, unparsable createdAt: never",
      inst("a", ownerTags("uid-gone"), { createdAt: "soon" }),
      0,
      false,
    ],
    ["owner gone, already Terminating", inst("a", ownerTags("uid-gone"), { state: "Terminating" }), 0, false],
    ["owner gone, Stopped", inst("a", ownerTags("uid-gone"), { state: "Stopped" }), 0, true],
    ["no owner tag", inst("a", { [managedByTagKey]: "kubefn" }), 0, false],
    ["empty owner tag", inst("a", { [managedByTagKey]: "kubefn", [ownerTagKey]: "" }), 0, false],
    ["no managed-by tag", inst("a", { [ownerTagKey]: "uid-gone" }), 0, false],
    [
      "managed by someone else",
      inst("a", { [managedByTagKey]: "other", [ownerTagKey]: "uid-gone" }),
      0,
      false,
    ],
    ["no tags", inst("a", {}), 0, false],
  ])("%s → %s", (_, instance, grace, orphan) => {
    expect(findOrphans([instance], proxies, now, grace)).toEqual(orphan ? [instance] : []);
  });

  it("defaults the grace to 600 seconds", () => {
    const young = inst("y", ownerTags("uid-gone"), { createdAt: ago(300) });
    const old = inst("o", ownerTags("uid-gone"), { createdAt: ago(900) });
    expect(findOrphans([young, old], [], now)).toEqual([old]);
  });

  it("an External Proxy owns no instance: one left by a Managed → External switch is an orphan", () => {
    const left = inst("a", ownerTags("uid-ext"));
    const external = { metadata: { name: "ext", uid: "uid-ext" }, spec: { mode: "External" } };
    const managed = { metadata: { name: "ext", uid: "uid-ext" }, spec: { mode: "Managed" } };
    expect(findOrphans([left], [external], now, 0)).toEqual([left]);
    expect(findOrphans([left], [managed], now, 0)).toEqual([]);
  });

  it("a proxy without a UID owns nothing", () => {
    const i = inst("a", ownerTags("uid-x"));
    expect(findOrphans([i], [{ metadata: { name: "no-uid" } }], now, 0)).toEqual([i]);
  });
});
