import { describe, expect, it } from "vitest";
import {
  buildInsertBody,
  gceErrorFrom,
  instanceFromGce,
  labelFilter,
  operationError,
  parseGceProviderId,
  sanitiseGceLabelKey,
  sanitiseGceLabelValue,
} from "./gce.ts";
import { type CreateRequest, nameFromUID, ownerTags, ProviderError } from "./provider.ts";

const uid = "3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6";
const req: CreateRequest = { name: nameFromUID(uid), namespace: "crawl", instance: {}, tags: ownerTags(uid) };
const defaults = {
  zone: "europe-west1-b",
  image: "projects/debian-cloud/global/images/family/debian-12",
  machineType: "e2-micro",
};

const googleError = (code: number, reason: string, message: string, status?: string) => ({
  error: { code, message, errors: [{ message, domain: "global", reason }], ...(status ? { status } : {}) },
});

describe("gceErrorFrom", () => {
  it.each<{ name: string; status: number; body: unknown; errorClass: string; reason: string }>([
    {
      name: "403 quotaExceeded",
      status: 403,
      body: googleError(403, "quotaExceeded", "Quota 'CPUS' exceeded.  Limit: 8.0 in region europe-west1."),
      errorClass: "quota",
      reason: "QuotaExceeded",
    },
    {
      name: "429 RESOURCE_EXHAUSTED about quota",
      status: 429,
      body: {
        error: {
          code: 429,
          message: "Quota exceeded for quota metric 'Queries'",
          status: "RESOURCE_EXHAUSTED",
        },
      },
      errorClass: "quota",
      reason: "QuotaExceeded",
    },
    {
      name: "403 rateLimitExceeded",
      status: 403,
      body: googleError(403, "rateLimitExceeded", "Rate Limit Exceeded"),
      errorClass: "transient",
      reason: "RateLimited",
    },
    {
      name: "429 without quota",
      status: 429,
      body: googleError(429, "userRateLimitExceeded", "slow down", "RESOURCE_EXHAUSTED"),
      errorClass: "transient",
      reason: "RateLimited",
    },
    {
      name: "400 invalid machine type",
      status: 400,
      body: googleError(
        400,
        "invalid",
        "Invalid value for field 'resource.machineType': 'zones/europe-west1-b/machineTypes/n9-huge'.",
        "INVALID_ARGUMENT",
      ),
      errorClass: "permanent",
      reason: "Invalid",
    },
    {
      name: "403 forbidden",
      status: 403,
      body: googleError(
        403,
        "forbidden",
        "Required 'compute.instances.create' permission",
        "PERMISSION_DENIED",
      ),
      errorClass: "permanent",
      reason: "Forbidden",
    },
    {
      name: "404 image",
      status: 404,
      body: googleError(404, "notFound", "The resource 'projects/x/global/images/y' was not found"),
      errorClass: "permanent",
      reason: "NotFound",
    },
    { name: "503 no body", status: 503, body: undefined, errorClass: "transient", reason: "Unavailable" },
    {
      name: "500 backendError",
      status: 500,
      body: googleError(500, "backendError", "Internal error"),
      errorClass: "transient",
      reason: "Unavailable",
    },
    {
      name: "400 resourceNotReady",
      status: 400,
      body: googleError(400, "resourceNotReady", "The resource is not ready"),
      errorClass: "transient",
      reason: "Unavailable",
    },
    { name: "401", status: 401, body: undefined, errorClass: "transient", reason: "Unauthenticated" },
    {
      name: "stockout",
      status: 503,
      body: googleError(503, "ZONE_RESOURCE_POOL_EXHAUSTED", "The zone does not have enough resources"),
      errorClass: "quota",
      reason: "ZoneResourcePoolExhausted",
    },
  ])("$name → $errorClass/$reason", ({ status, body, errorClass, reason }) => {
    const err = gceErrorFrom(status, body, "insert x");
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.errorClass).toBe(errorClass);
    expect(err.reason).toBe(reason);
    expect(err.message).toContain("insert x");
  });

  it("carries Retry-After", () => {
    expect(gceErrorFrom(503, undefined, "x", 7).retryAfterSeconds).toBe(7);
  });
});

describe("operationError", () => {
  it.each<{
    name: string;
    op: Parameters<typeof operationError>[0];
    want: number | undefined;
    reason?: string;
  }>([
    { name: "running", op: { kind: "compute#operation", status: "RUNNING" }, want: undefined },
    { name: "done, no error", op: { status: "DONE" }, want: undefined },
    {
      name: "quota",
      op: {
        status: "DONE",
        httpErrorStatusCode: 403,
        error: { errors: [{ code: "QUOTA_EXCEEDED", message: "Quota 'CPUS' exceeded." }] },
      },
      want: 403,
      reason: "QuotaExceeded",
    },
    {
      name: "already exists",
      op: {
        status: "DONE",
        httpErrorStatusCode: 400,
        error: { errors: [{ code: "RESOURCE_ALREADY_EXISTS" }] },
      },
      want: 409,
    },
  ])("$name", ({ op, want, reason }) => {
    const got = operationError(op);
    expect(got?.status).toBe(want);
    if (reason && got) expect(gceErrorFrom(got.status, got.body, "op").reason).toBe(reason);
  });
});

describe("buildInsertBody", () => {
  it("has the documented shape", () => {
    expect(buildInsertBody({ ...req, cloudInit: "#cloud-config\n" }, defaults)).toEqual({
      name: "px-3f2a9c4e1b7d4e8f9a0b",
      machineType: "zones/europe-west1-b/machineTypes/e2-micro",
      disks: [
        {
          boot: true,
          autoDelete: true,
          initializeParams: { sourceImage: "projects/debian-cloud/global/images/family/debian-12" },
        },
      ],
      networkInterfaces: [{ accessConfigs: [{ type: "ONE_TO_ONE_NAT", name: "External NAT" }] }],
      serviceAccounts: [],
      labels: { "crawl_kubefn_dev_proxy-uid": uid, "crawl_kubefn_dev_managed-by": "kubefn" },
      metadata: {
        items: [
          { key: "block-project-ssh-keys", value: "TRUE" },
          { key: "user-data", value: "#cloud-config\n" },
        ],
      },
    });
  });

  it("a shape label that sanitises to a tag's key does not overwrite it", () => {
    const labels = {
      "crawl.kubefn.dev/proxy-uid": "x",
      "crawl_kubefn_dev_proxy-uid": "another-proxys-uid",
      "crawl.kubefn.dev/managed-by": "someone",
      "CRAWL_KUBEFN_DEV_MANAGED-BY": "someone",
      team: "web",
    };
    expect(buildInsertBody({ ...req, instance: { ...req.instance, labels } }, defaults).labels).toEqual({
      "crawl_kubefn_dev_proxy-uid": uid,
      "crawl_kubefn_dev_managed-by": "kubefn",
      team: "web",
    });
  });

  it.each([
    [{ machineType: "n2-standard-2" }, "zones/europe-west1-b/machineTypes/n2-standard-2"],
    [{ machineType: "zones/us-east1-c/machineTypes/e2-small" }, "zones/us-east1-c/machineTypes/e2-small"],
  ])("machine type %j → %s", (instance, want) => {
    expect(buildInsertBody({ ...req, instance }, defaults).machineType).toBe(want);
  });

  it("without cloud-init only kubefn's metadata; takes network settings as paths", () => {
    const body = buildInsertBody(req, {
      ...defaults,
      network: "global/networks/crawl",
      subnetwork: "regions/r/subnetworks/s",
    });
    expect(body.metadata).toEqual({ items: [{ key: "block-project-ssh-keys", value: "TRUE" }] });
    expect(body.networkInterfaces[0]).toMatchObject({
      network: "global/networks/crawl",
      subnetwork: "regions/r/subnetworks/s",
    });
  });

  it("the operator's network and subnetwork by name, its network tags, no service account; the external address stays", () => {
    const body = buildInsertBody(
      { ...req, instance: { zone: "us-east1-c" } },
      {
        ...defaults,
        zone: "us-east1-c",
        network: "crawl-proxies",
        subnetwork: "proxies",
        networkTags: ["kubefn-proxy"],
      },
    );
    expect(body.networkInterfaces).toEqual([
      {
        network: "global/networks/crawl-proxies",
        subnetwork: "regions/us-east1/subnetworks/proxies",
        accessConfigs: [{ type: "ONE_TO_ONE_NAT", name: "External NAT" }],
      },
    ]);
    expect(body.tags).toEqual({ items: ["kubefn-proxy"] });
    expect(body.serviceAccounts).toEqual([]);
  });
});

describe("instanceFromGce", () => {
  const nic = [{ networkIP: "10.132.0.5", accessConfigs: [{ natIP: "34.76.1.2" }] }];
  it.each<{ status: string; state: string; ip?: string }>([
    { status: "PROVISIONING", state: "Provisioning" },
    { status: "STAGING", state: "Provisioning" },
    { status: "REPAIRING", state: "Provisioning" },
    { status: "RUNNING", state: "Running", ip: "34.76.1.2" },
    { status: "STOPPING", state: "Stopped" },
    { status: "SUSPENDING", state: "Stopped" },
    { status: "SUSPENDED", state: "Stopped" },
    { status: "TERMINATED", state: "Stopped" },
  ])("$status → $state", ({ status, state, ip }) => {
    const inst = instanceFromGce("p", "europe-west1-b", {
      name: "px-1",
      zone: "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west1-c",
      status,
      networkInterfaces: nic,
      labels: { "crawl_kubefn_dev_proxy-uid": uid, team: "web" },
    });
    expect(inst).toEqual({
      id: "gce://p/europe-west1-c/px-1",
      state,
      ...(ip ? { ip } : {}),
      tags: { "crawl.kubefn.dev/proxy-uid": uid, team: "web" },
    });
  });

  it("falls back to the internal address without an external one", () => {
    const inst = instanceFromGce("p", "z", {
      name: "n",
      status: "RUNNING",
      networkInterfaces: [{ networkIP: "10.0.0.9" }],
    });
    expect(inst.ip).toBe("10.0.0.9");
  });
});

describe("labels and IDs", () => {
  it.each([
    ["crawl.kubefn.dev/proxy-uid", "crawl_kubefn_dev_proxy-uid"],
    ["Team", "team"],
    ["9lives", "k9lives"],
  ])("key %j → %j", (key, want) => expect(sanitiseGceLabelKey(key)).toBe(want));

  it.each([
    [uid, uid],
    ["Web Crawl", "web_crawl"],
    ["x".repeat(70), "x".repeat(63)],
  ])("value %j → %j", (value, want) => expect(sanitiseGceLabelValue(value)).toBe(want));

  it("label filter", () => {
    expect(labelFilter({ key: "crawl.kubefn.dev/managed-by", value: "kubefn" })).toBe(
      'labels.crawl_kubefn_dev_managed-by="kubefn"',
    );
  });

  it.each(["kubernetes://a/b", "gce://p/z", "gce://other/z/n", "gce://p/z/n/x"])("rejects %j", (id) => {
    expect(() => parseGceProviderId(id, "p")).toThrow(ProviderError);
  });
});
