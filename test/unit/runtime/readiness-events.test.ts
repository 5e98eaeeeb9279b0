/**
 * Issue 33: readiness of what an operator owns arrives as an event. A status write of a SubPool's
 * StatefulSet or of a Site component's Deployment — the only write the kubelet's and the workload
 * controllers' readiness changes make — maps to its owner's key with the reason `owned-status`
 * (a look at readiness), on the audit path at the level the policy logs it: Metadata for a
 * StatefulSet (its key alone: `subpool-<name>/<name>-cpa-manager`), RequestResponse for the
 * operator namespace's Deployments (their controller reference). A message is not a fact: the
 * event only names a key, and a forged one names nothing kubefn did not derive.
 */
import { describe, expect, it } from "vitest";
import { siteResource } from "../../../shared/controllers/site/api.ts";
import { defaultSiteRegistry } from "../../../shared/controllers/site/components/index.ts";
import { siteController } from "../../../shared/controllers/site/controller.ts";
import { subPoolController } from "../../../shared/controllers/subpool/controller.ts";
import { createRegistry, mapEvents, ownedStatusReason, requestKey } from "../../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../../support/fake-kube.ts";

const SELF = "system:serviceaccount:kubefn-system:kubefn";
const config = { imageRegistry: "r", imageTag: "t", apiServerEndpoint: "https://api" };
const registry = createRegistry([
  subPoolController(),
  siteController({ registry: defaultSiteRegistry(), env: { config } }),
]);

const eventList = (...items: unknown[]) => ({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items });

/** The audit event of a workload controller's status write, as the API server sends it. */
function statusWrite(
  resource: "statefulsets" | "deployments",
  namespace: string,
  name: string,
  opts: { user?: string; body?: Record<string, unknown>; verb?: string; subresource?: string } = {},
) {
  return {
    level: opts.body ? "RequestResponse" : "Metadata",
    auditID: `c0000000-0000-4000-8000-${Math.random().toString(16).slice(2, 14).padEnd(12, "0")}`,
    stage: "ResponseComplete",
    requestURI: `/apis/apps/v1/namespaces/${namespace}/${resource}/${name}/status`,
    verb: opts.verb ?? "update",
    user: {
      username: opts.user ?? "system:serviceaccount:kube-system:statefulset-controller",
      groups: ["system:serviceaccounts"],
    },
    objectRef: {
      resource,
      namespace,
      name,
      apiGroup: "apps",
      apiVersion: "v1",
      subresource: opts.subresource ?? "status",
    },
    responseStatus: { metadata: {}, code: 200 },
    requestReceivedTimestamp: "2026-12-04T04:00:00.000000Z",
    stageTimestamp: "2026-12-04T04:00:00.001000Z",
    ...(opts.body ? { responseObject: opts.body } : {}),
  };
}

const siteOwner = (name: string) => ({
  apiVersion: "unbounded-cloud.io/v1alpha3",
  kind: "Site",
  name,
  uid: `uid-${name}`,
  controller: true,
});
const deployment = (name: string, ownerReferences: unknown[]) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: "kubefn-system", generation: 1, ownerReferences },
  status: { observedGeneration: 1, replicas: 1, availableReplicas: 1, updatedReplicas: 1 },
});

async function mapped(...items: unknown[]) {
  const { ctx } = fakeContext(new FakeKube());
  const result = await mapEvents(ctx, registry, eventList(...items), { selfUsernames: [SELF] });
  return {
    ...result,
    keyed: result.requests.map((r) => ({ ...r, reason: result.reasons.get(requestKey(r)) })),
  };
}

describe("readiness of owned objects arrives as an event (issue 33)", () => {
  it("a SubPool's StatefulSet status write (audit Metadata: its key alone) → one look at the pool", async () => {
    const result = await mapped(statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager"));
    expect(result.keyed).toEqual([{ controller: "subpool", name: "alpha", reason: ownedStatusReason }]);
    expect(result.counts).toMatchObject({ events: 1, mapped: 1, requests: 1 });
  });

  it("several status writes in one batch are one request", async () => {
    const write = () => statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager");
    const result = await mapped(write(), write(), write());
    expect(result.keyed).toEqual([{ controller: "subpool", name: "alpha", reason: ownedStatusReason }]);
  });

  it("a status write beside a change that needs a whole pass: the whole pass, no reason", async () => {
    const spec = { ...statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager"), subresource: "" };
    const specWrite = {
      ...spec,
      objectRef: { ...spec.objectRef, subresource: undefined },
      user: { username: "jane" },
    };
    for (const items of [
      [statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager"), specWrite],
      [specWrite, statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager")],
    ]) {
      const result = await mapped(...items);
      expect(result.keyed).toEqual([{ controller: "subpool", name: "alpha", reason: undefined }]);
    }
  });

  it("a Site component's Deployment status write (RequestResponse: its controller reference) → a pass of its Site", async () => {
    const result = await mapped(
      statusWrite("deployments", "kubefn-system", "metalman-west", {
        user: "system:serviceaccount:kube-system:deployment-controller",
        body: deployment("metalman-west", [siteOwner("west")]),
      }),
    );
    expect(result.keyed).toEqual([{ controller: "site", name: "west", reason: ownedStatusReason }]);
  });

  it("a Site component's Deployment status write at Metadata level → its Site by name (metalman-<site>)", async () => {
    const result = await mapped(statusWrite("deployments", "kubefn-system", "metalman-west"));
    expect(result.keyed).toEqual([{ controller: "site", name: "west", reason: ownedStatusReason }]);
  });

  it.each([
    [
      "a StatefulSet of a namespace kubefn did not derive",
      statusWrite("statefulsets", "default", "alpha-cpa-manager"),
    ],
    [
      "another StatefulSet in a pool's namespace (not the one the pool derives)",
      statusWrite("statefulsets", "subpool-alpha", "intruder"),
    ],
    [
      "a Deployment outside the operator namespace, though named like a component",
      statusWrite("deployments", "tenant", "metalman-west"),
    ],
    [
      "a Deployment whose body names no controller (a body says whose it is, or it is no one's)",
      statusWrite("deployments", "kubefn-system", "metalman-west", { body: deployment("metalman-west", []) }),
    ],
    [
      "a Deployment controlled by a kind no operator reports readiness of",
      statusWrite("deployments", "kubefn-system", "metalman-west", {
        body: deployment("metalman-west", [
          { apiVersion: "apps/v1", kind: "ReplicaSet", name: "x", uid: "u", controller: true },
        ]),
      }),
    ],
  ])("a forged or foreign event maps to nothing: %s", async (_name, item) => {
    const result = await mapped(item);
    expect(result.requests).toEqual([]);
    expect(result.counts.mapped).toBe(0);
  });

  it("a forged event names a pool that may not exist: it is only a key (the pass reads the pool and finds none)", async () => {
    const result = await mapped(statusWrite("statefulsets", "subpool-nobody", "nobody-cpa-manager"));
    // One GET of SubPool "nobody" at most: the request carries no body and decides no write.
    expect(result.requests).toEqual([{ controller: "subpool", name: "nobody" }]);
  });

  it("status writes of kinds no operator takes readiness from stay dropped", async () => {
    const pdb = {
      ...statusWrite("statefulsets", "subpool-alpha", "alpha"),
      objectRef: {
        resource: "poddisruptionbudgets",
        namespace: "subpool-alpha",
        name: "alpha",
        apiGroup: "policy",
        apiVersion: "v1",
        subresource: "status",
      },
    };
    const result = await mapped(pdb);
    expect(result.requests).toEqual([]);
    expect(result.counts.dropped).toBe(1);
  });

  it("kubefn's own status writes of what it owns stay dropped; other subresources too", async () => {
    const result = await mapped(
      statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager", { user: SELF }),
      statusWrite("statefulsets", "subpool-alpha", "alpha-cpa-manager", { subresource: "eviction" }),
    );
    expect(result.requests).toEqual([]);
    expect(result.counts.dropped).toBe(2);
  });

  describe("the relay: an event it marks readinessOnly (its readiness predicate saw the status alone change)", () => {
    const poolOwner = {
      apiVersion: "subrelay.example.com/v1alpha1",
      kind: "SubPool",
      name: "alpha",
      uid: "uid-alpha",
      controller: true,
    };
    const relayed = (extra: Record<string, unknown>, ownerReferences: unknown[] = [poolOwner]) => ({
      type: "MODIFIED",
      resource: { group: "apps", version: "v1", resource: "statefulsets" },
      object: {
        apiVersion: "apps/v1",
        kind: "StatefulSet",
        metadata: { name: "alpha-cpa-manager", namespace: "subpool-alpha", generation: 1, ownerReferences },
      },
      ...extra,
    });
    const relayMapped = async (...events: unknown[]) => {
      const { ctx } = fakeContext(new FakeKube());
      const result = await mapEvents(ctx, registry, {
        kind: "RelayBatch",
        apiVersion: "kubefn.dev/v1",
        events,
      });
      return result.requests.map((r) => ({ ...r, reason: result.reasons.get(requestKey(r)) }));
    };

    it("maps to its owner as a look", async () => {
      expect(await relayMapped(relayed({ readinessOnly: true }))).toEqual([
        { controller: "subpool", name: "alpha", reason: ownedStatusReason },
      ]);
    });

    it("unmarked (a spec change), it is a whole pass", async () => {
      expect(await relayMapped(relayed({}))).toEqual([
        { controller: "subpool", name: "alpha", reason: undefined },
      ]);
    });

    it("whose body names no primary as its controller, it maps to nothing", async () => {
      expect(await relayMapped(relayed({ readinessOnly: true }, []))).toEqual([]);
    });
  });

  it("the registry refuses readiness from a kind the controller does not own", () => {
    expect(() =>
      createRegistry([
        {
          ...subPoolController(),
          readinessFrom: [{ ...registry.controllers[0]!.for, kind: "Job", resource: "jobs", group: "batch" }],
        },
      ]),
    ).toThrow(/takes readiness from Job: it must be listed in owns/);
  });

  describe("machina's Deployment: shared by every Site, no Site's controller reference (seed 004: a cluster component)", () => {
    /** Intake with Sites `west` and `east` in the cluster (the mapper lists them). */
    const withSites = async (body: unknown) => {
      const kube = new FakeKube();
      for (const name of ["west", "east"]) {
        kube.seed(siteResource, {
          apiVersion: "unbounded-cloud.io/v1alpha3",
          kind: "Site",
          metadata: { name },
        });
      }
      const { ctx } = fakeContext(kube);
      const result = await mapEvents(ctx, registry, body, { selfUsernames: [SELF] });
      return result.requests.map((r) => ({ ...r, reason: result.reasons.get(requestKey(r)) }));
    };
    const every = [
      { controller: "site", name: "west", reason: ownedStatusReason },
      { controller: "site", name: "east", reason: ownedStatusReason },
    ];

    it("regression: its status write (RequestResponse, as the policy logs the operator namespace) → a pass of every Site", async () => {
      const write = statusWrite("deployments", "kubefn-system", "machina", {
        user: "system:serviceaccount:kube-system:deployment-controller",
        body: deployment("machina", []),
      });
      expect(await withSites(eventList(write))).toEqual(every);
    });

    it("at Metadata level (its key alone) → every Site too", async () => {
      expect(await withSites(eventList(statusWrite("deployments", "kubefn-system", "machina")))).toEqual(
        every,
      );
    });

    it("through the relay, marked readinessOnly → every Site", async () => {
      const event = {
        type: "MODIFIED",
        readinessOnly: true,
        resource: { group: "apps", version: "v1", resource: "deployments" },
        object: deployment("machina", []),
      };
      expect(await withSites({ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events: [event] })).toEqual(
        every,
      );
    });

    it("another Deployment without a Site's controller reference, or machina's name elsewhere, maps to nothing", async () => {
      const other = statusWrite("deployments", "kubefn-system", "someone-else", {
        body: deployment("someone-else", []),
      });
      const elsewhere = statusWrite("deployments", "default", "machina");
      expect(await withSites(eventList(other, elsewhere))).toEqual([]);
    });
  });

  it("the registry refuses a readiness mapper of a kind the controller takes no readiness from", () => {
    expect(() =>
      createRegistry([
        {
          ...subPoolController(),
          readinessWatches: [{ resource: registry.controllers[0]!.for, map: () => [] }],
        },
      ]),
    ).toThrow(/maps readiness of SubPool: it must be listed in readinessFrom/);
  });
});
