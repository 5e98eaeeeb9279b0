import { describe, expect, it } from "vitest";
import { defaultInstanceAllowList, instanceRefusal } from "./allow-list.ts";

describe("instanceRefusal", () => {
  it.each([
    [{}, undefined],
    [{ image: "ghcr.io/kubefn/forward-proxy:latest" }, undefined],
    [{ image: "ghcr.io/kubefn/forward-proxy@sha256:abc" }, undefined],
    [{ image: "projects/debian-cloud/global/images/family/debian-12" }, undefined],
    [{ image: "ghcr.io/kubefn/forward-proxy-evil:1" }, "ImageNotAllowed"],
    [{ image: "projects/attacker/global/images/miner" }, "ImageNotAllowed"],
    [{ machineType: "e2-small" }, undefined],
    [{ machineType: "e2-standard-32" }, "MachineTypeNotAllowed"],
    [{ machineType: "zones/europe-west1-b/machineTypes/e2-small" }, "MachineTypeNotAllowed"],
    // No zones on the list (no GCE): the pod provider ignores zones.
    [{ zone: "anywhere" }, undefined],
  ])("default allow-list: %j → %s", (shape, reason) => {
    expect(instanceRefusal(shape, defaultInstanceAllowList)?.reason).toBe(reason);
  });

  it("`*` admits anything; an empty list admits only what the provider defaults", () => {
    expect(instanceRefusal({ image: "x:1", machineType: "m" }, { images: ["*"], machineTypes: ["*"] })).toBe(
      undefined,
    );
    const refused = instanceRefusal({ image: "x:1" }, { images: [], machineTypes: [] });
    expect(refused?.reason).toBe("ImageNotAllowed");
    expect(refused?.message).toBe(`spec.instance.image "x:1" is not on the operator's allow-list (empty)`);
    expect(instanceRefusal({}, { images: [], machineTypes: [], zones: [] })).toBe(undefined);
  });
});
