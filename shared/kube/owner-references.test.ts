import { describe, expect, it } from "vitest";
import {
  controllerOf,
  controllerRefTo,
  isControlledBy,
  isOwnedBy,
  upsertOwnerReference,
} from "./owner-references.ts";
import type { KubeObject, OwnerReference } from "./port.ts";

const site: KubeObject = {
  apiVersion: "unbounded.example.com/v1alpha3",
  kind: "Site",
  metadata: { name: "lab", uid: "uid-site" },
};
const siteRef: OwnerReference = {
  apiVersion: "unbounded.example.com/v1alpha3",
  kind: "Site",
  name: "lab",
  uid: "uid-site",
  controller: true,
};
const otherRef: OwnerReference = {
  apiVersion: "apps/v1",
  kind: "ReplicaSet",
  name: "rs",
  uid: "uid-rs",
  controller: true,
};

function owned(refs: OwnerReference[] | undefined): KubeObject {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm", ownerReferences: refs } };
}

describe("controllerRefTo", () => {
  it("is a controller reference without blockOwnerDeletion", () => {
    expect(controllerRefTo(site)).toEqual(siteRef);
    expect(controllerRefTo(site)).not.toHaveProperty("blockOwnerDeletion");
  });

  it("needs an owner read from the server", () => {
    expect(() => controllerRefTo({ ...site, metadata: { name: "lab" } })).toThrow(/uid/);
  });
});

describe("controllerOf / isControlledBy / isOwnedBy", () => {
  it.each([
    { name: "no refs", refs: undefined, controller: undefined, controlled: false, ownedBy: false },
    { name: "our controller ref", refs: [siteRef], controller: siteRef, controlled: true, ownedBy: true },
    { name: "someone else's", refs: [otherRef], controller: otherRef, controlled: false, ownedBy: false },
    {
      name: "ours without controller flag",
      refs: [{ ...siteRef, controller: false }],
      controller: undefined,
      controlled: false,
      ownedBy: true,
    },
    {
      name: "ours plain, someone else's controller",
      refs: [{ ...siteRef, controller: undefined }, otherRef],
      controller: otherRef,
      controlled: false,
      ownedBy: true,
    },
  ])("$name", ({ refs, controller, controlled, ownedBy }) => {
    const obj = owned(refs);
    expect(controllerOf(obj)).toEqual(controller);
    expect(isControlledBy(obj, site)).toBe(controlled);
    expect(isOwnedBy(obj, site)).toBe(ownedBy);
  });

  it("never matches an owner without a uid", () => {
    expect(isControlledBy(owned([{ ...siteRef, uid: "" }]), { metadata: {} })).toBe(false);
  });
});

describe("upsertOwnerReference", () => {
  it.each<{ name: string; refs: OwnerReference[] | undefined; expected: OwnerReference[]; changed: boolean }>(
    [
      { name: "adds to none", refs: undefined, expected: [siteRef], changed: true },
      { name: "adds beside others", refs: [otherRef], expected: [otherRef, siteRef], changed: true },
      { name: "already there", refs: [otherRef, siteRef], expected: [otherRef, siteRef], changed: false },
      {
        name: "non-controller ref converges to controller",
        refs: [{ ...siteRef, controller: undefined }],
        expected: [siteRef],
        changed: true,
      },
      {
        name: "controller: false converges too",
        refs: [{ ...siteRef, controller: false }],
        expected: [siteRef],
        changed: true,
      },
      {
        name: "renamed owner is rewritten",
        refs: [{ ...siteRef, name: "old" }],
        expected: [siteRef],
        changed: true,
      },
      {
        name: "other apiVersion is another owner",
        refs: [{ ...siteRef, apiVersion: "unbounded.example.com/v1alpha2" }],
        expected: [{ ...siteRef, apiVersion: "unbounded.example.com/v1alpha2" }, siteRef],
        changed: true,
      },
      {
        name: "blockOwnerDeletion alone is no difference",
        refs: [{ ...siteRef, blockOwnerDeletion: true }],
        expected: [{ ...siteRef, blockOwnerDeletion: true }],
        changed: false,
      },
    ],
  )("$name", ({ refs, expected, changed }) => {
    const before = structuredClone(refs);
    expect(upsertOwnerReference(refs, siteRef)).toEqual({ refs: expected, changed });
    expect(refs).toEqual(before);
  });
});
