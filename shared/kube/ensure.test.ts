import { describe, expect, it } from "vitest";
import { ensureObject } from "./ensure.ts";
import { AlreadyExistsError, NotFoundError } from "./errors.ts";
import { fieldsPatch } from "./merge-patch.ts";
import type { Kube, KubeObject, OwnerReference } from "./port.ts";
import { Resources } from "./resources.ts";

const owner: KubeObject = {
  apiVersion: "kubefn.dev/v1alpha1",
  kind: "SubPool",
  metadata: { name: "pool", uid: "uid-pool" },
};
const ourRef: OwnerReference = {
  apiVersion: "kubefn.dev/v1alpha1",
  kind: "SubPool",
  name: "pool",
  uid: "uid-pool",
  controller: true,
};
const theirRef: OwnerReference = {
  apiVersion: "v1",
  kind: "Other",
  name: "o",
  uid: "uid-other",
  controller: true,
};

interface Service extends KubeObject {
  spec: { type?: string; clusterIP?: string; ports?: unknown[]; selector?: Record<string, string> };
}

const desired: Service = {
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "svc", namespace: "ns", labels: { managed: "kubefn" } },
  spec: { type: "ClusterIP", ports: [{ port: 80, protocol: "TCP", targetPort: 80 }], selector: { app: "a" } },
};

const ownedFields = (o: Service, d: Service) =>
  fieldsPatch(o, d, ["spec.type", "spec.ports", "spec.selector"]);

function observedWith(change: (s: Service) => void): Service {
  const s = structuredClone(desired);
  s.metadata = {
    ...s.metadata,
    uid: "uid-svc",
    resourceVersion: "5",
    ownerReferences: [ourRef],
    labels: { other: "x", managed: "kubefn" },
  };
  s.spec.clusterIP = "10.0.0.9";
  change(s);
  return s;
}

/** A Kube holding at most one object; records writes. */
function fakeKube(initial: Service | undefined, opts: { raceOnCreate?: Service } = {}) {
  let stored = initial;
  const writes: { verb: string; obj: KubeObject }[] = [];
  /** Every request, reads included, in order. */
  const requests: string[] = [];
  const notFound = () => new NotFoundError("not found", { status: 404, reason: "NotFound" });
  const kube = {
    async get() {
      requests.push("get");
      if (!stored) throw notFound();
      return structuredClone(stored);
    },
    async create(_res: unknown, obj: Service) {
      writes.push({ verb: "create", obj });
      requests.push("create");
      if (stored) throw new AlreadyExistsError("exists", { status: 409, reason: "AlreadyExists" });
      if (opts.raceOnCreate) {
        stored = opts.raceOnCreate;
        throw new AlreadyExistsError("exists", { status: 409, reason: "AlreadyExists" });
      }
      stored = { ...obj, metadata: { ...obj.metadata, uid: "new", resourceVersion: "1" } };
      return structuredClone(stored);
    },
    async update(_res: unknown, obj: Service) {
      writes.push({ verb: "update", obj });
      requests.push("update");
      stored = obj;
      return structuredClone(obj);
    },
  } as unknown as Kube;
  return { kube, writes, requests };
}

describe("ensureObject", () => {
  it.each<{ name: string; observed: Service | undefined; result: string; writes: string[]; race?: Service }>([
    { name: "absent → created", observed: undefined, result: "created", writes: ["create"] },
    { name: "in sync → unchanged", observed: observedWith(() => {}), result: "unchanged", writes: [] },
    {
      name: "selector drift → updated",
      observed: observedWith((s) => {
        s.spec.selector = { app: "b" };
      }),
      result: "updated",
      writes: ["update"],
    },
    {
      name: "our label missing → updated",
      observed: observedWith((s) => {
        s.metadata.labels = { other: "x" };
      }),
      result: "updated",
      writes: ["update"],
    },
    {
      name: "non-controller ref to us → converges",
      observed: observedWith((s) => {
        s.metadata.ownerReferences = [{ ...ourRef, controller: undefined }];
      }),
      result: "updated",
      writes: ["update"],
    },
    {
      name: "controlled by another → conflict",
      observed: observedWith((s) => {
        s.metadata.ownerReferences = [theirRef];
      }),
      result: "conflict",
      writes: [],
    },
    {
      name: "no owner at all → conflict (never adopt)",
      observed: observedWith((s) => {
        s.metadata.ownerReferences = undefined;
      }),
      result: "conflict",
      writes: [],
    },
    {
      name: "lost a create race to our own twin → unchanged",
      observed: undefined,
      race: observedWith(() => {}),
      result: "unchanged",
      writes: ["create"],
    },
    {
      name: "lost a create race to a stranger → conflict",
      observed: undefined,
      race: observedWith((s) => {
        s.metadata.ownerReferences = [theirRef];
      }),
      result: "conflict",
      writes: ["create"],
    },
  ])("$name", async ({ observed, result, writes, race }) => {
    const fake = fakeKube(observed, race ? { raceOnCreate: race } : {});
    const out = await ensureObject(fake.kube, Resources.Service, desired, { owner, ownedFields });
    expect(out.result).toBe(result);
    expect(fake.writes.map((w) => w.verb)).toEqual(writes);
  });

  it("creates with our controller reference", async () => {
    const fake = fakeKube(undefined);
    await ensureObject(fake.kube, Resources.Service, desired, { owner, ownedFields });
    expect(fake.writes[0]!.obj.metadata.ownerReferences).toEqual([ourRef]);
  });

  it("updates only owned fields, keeping clusterIP, others' labels and the resourceVersion", async () => {
    const fake = fakeKube(
      observedWith((s) => {
        s.spec.selector = { app: "b", extra: "y" };
        s.metadata.labels = { other: "x", managed: "someone" };
      }),
    );
    await ensureObject(fake.kube, Resources.Service, desired, { owner, ownedFields });
    const written = fake.writes[0]!.obj as Service;
    expect(written.spec).toEqual({ ...desired.spec, clusterIP: "10.0.0.9" });
    expect(written.metadata.labels).toEqual({ other: "x", managed: "kubefn" });
    expect(written.metadata.resourceVersion).toBe("5");
  });

  it.each<{ name: string; observed: Service | undefined; result: string; requests: string[] }>([
    { name: "absent → one create, no read", observed: undefined, result: "created", requests: ["create"] },
    {
      name: "in sync → the refused create, then the read",
      observed: observedWith(() => {}),
      result: "unchanged",
      requests: ["create", "get"],
    },
    {
      name: "drifted → refused create, read, update",
      observed: observedWith((s) => {
        s.spec.selector = { app: "b" };
      }),
      result: "updated",
      requests: ["create", "get", "update"],
    },
    {
      name: "controlled by another → conflict, nothing written",
      observed: observedWith((s) => {
        s.metadata.ownerReferences = [theirRef];
      }),
      result: "conflict",
      requests: ["create", "get"],
    },
  ])("createFirst: $name", async ({ observed, result, requests }) => {
    const fake = fakeKube(observed);
    const out = await ensureObject(fake.kube, Resources.Service, desired, {
      owner,
      ownedFields,
      createFirst: true,
    });
    expect(out.result).toBe(result);
    expect(fake.requests).toEqual(requests);
  });

  it("reads first by default: absent costs a 404 and the create", async () => {
    const fake = fakeKube(undefined);
    await ensureObject(fake.kube, Resources.Service, desired, { owner, ownedFields });
    expect(fake.requests).toEqual(["get", "create"]);
  });
});
