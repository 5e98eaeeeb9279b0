import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { bytesFromBase64Url, pemFromBytes, type ServiceAccountKey } from "../../../credentials/google.ts";
import { createGceProvider } from "./gce.ts";
import {
  type CreateRequest,
  nameFromUID,
  ownerTags,
  type Provider,
  ProviderError,
  ProviderNotFoundError,
} from "./provider.ts";

/**
 * A local stand-in for both oauth2.googleapis.com/token and compute.googleapis.com/compute/v1: it
 * checks every request the way Google would (the JWT assertion verifies against the service
 * account's public key, the bearer token is one it issued) and answers with the documented shapes.
 */
interface Recorded {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
}

const project = "crawl-test";
const zone = "europe-west1-b";
const uid = "3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6";
const name = nameFromUID(uid);
const instancesPath = `/compute/v1/projects/${project}/zones/${zone}/instances`;

let server: Server;
let baseUrl: string;
let publicKey: CryptoKey;
let serviceAccount: ServiceAccountKey;
/** Tokens issued, in order; the API accepts only the last one. */
let issued: string[];
let apiCalls: Recorded[];
let tokenCalls: number;
/** Per-test handler for Compute API requests (after authentication). */
let compute: (req: Recorded) => { status: number; body?: unknown; headers?: Record<string, string> };
let authFailures: string[];

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function verifyAssertion(assertion: string): Promise<Record<string, unknown> | undefined> {
  const [header, claims, signature] = assertion.split(".");
  if (!header || !claims || !signature) return undefined;
  const ok = await crypto.subtle.verify(
    "RSASSA-PKCS1-v1_5",
    publicKey,
    bytesFromBase64Url(signature),
    new TextEncoder().encode(`${header}.${claims}`),
  );
  return ok ? JSON.parse(new TextDecoder().decode(bytesFromBase64Url(claims))) : undefined;
}

beforeAll(async () => {
  const pair = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  publicKey = pair.publicKey;
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));

  server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "http://localhost");
      const text = await readBody(req);
      const send = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json; charset=UTF-8", ...headers });
        res.end(body === undefined ? "" : JSON.stringify(body));
      };

      if (url.pathname === "/token") {
        const form = new URLSearchParams(text);
        const claims =
          req.method === "POST" &&
          req.headers["content-type"] === "application/x-www-form-urlencoded" &&
          form.get("grant_type") === "urn:ietf:params:oauth:grant-type:jwt-bearer"
            ? await verifyAssertion(form.get("assertion") ?? "")
            : undefined;
        if (
          !claims ||
          claims.iss !== serviceAccount.client_email ||
          claims.aud !== `${baseUrl}/token` ||
          claims.scope !== "https://www.googleapis.com/auth/compute" ||
          (claims.exp as number) - (claims.iat as number) !== 3600
        ) {
          authFailures.push(`bad token request: ${text.slice(0, 80)}`);
          return send(400, { error: "invalid_grant", error_description: "Invalid JWT Signature." });
        }
        tokenCalls++;
        const token = `ya29.test-${tokenCalls}`;
        issued.push(token);
        return send(200, { access_token: token, expires_in: 3599, token_type: "Bearer" });
      }

      if (req.headers.authorization !== `Bearer ${issued.at(-1)}`) {
        authFailures.push(`bad bearer on ${req.method} ${url.pathname}: ${req.headers.authorization}`);
        return send(401, {
          error: {
            code: 401,
            message: "Request had invalid authentication credentials.",
            errors: [{ message: "Invalid Credentials", domain: "global", reason: "authError" }],
            status: "UNAUTHENTICATED",
          },
        });
      }
      const recorded: Recorded = {
        method: req.method ?? "",
        path: url.pathname,
        query: url.searchParams,
        body: text === "" ? undefined : JSON.parse(text),
      };
      apiCalls.push(recorded);
      const answer = compute(recorded);
      send(answer.status, answer.body, answer.headers);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  serviceAccount = {
    client_email: "kubefn@crawl-test.iam.gserviceaccount.com",
    private_key: pemFromBytes(pkcs8, "PRIVATE KEY"),
    private_key_id: "0123abcd",
    token_uri: `${baseUrl}/token`,
  };
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

let now: Date;
let provider: Provider;

beforeEach(() => {
  issued = [];
  apiCalls = [];
  tokenCalls = 0;
  authFailures = [];
  now = new Date("2026-11-30T05:00:00Z");
  compute = () => ({ status: 500, body: { error: { code: 500, message: "unexpected request" } } });
  provider = createGceProvider({
    project,
    zone,
    serviceAccountKey: serviceAccount,
    baseUrl: `${baseUrl}/compute/v1`,
    clock: { now: () => now },
    network: "crawl-proxies",
    networkTags: ["kubefn-proxy"],
  });
});

const createRequest: CreateRequest = {
  name,
  namespace: "crawl",
  cloudInit: "#cloud-config\npackages: [squid]\n",
  instance: { machineType: "e2-small", labels: { team: "Web" } },
  tags: ownerTags(uid),
};
const storedLabels = {
  team: "web",
  "crawl_kubefn_dev_proxy-uid": uid,
  "crawl_kubefn_dev_managed-by": "kubefn",
};

function operation(opType: string, target: string, extra: Record<string, unknown> = {}) {
  return {
    kind: "compute#operation",
    id: "4127811947813460470",
    name: "operation-1764478800000-5f1e2d3c4b5a6-7f8e9d0c-1a2b3c4d",
    zone: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}`,
    operationType: opType,
    targetLink: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}/instances/${target}`,
    status: "RUNNING",
    progress: 0,
    insertTime: "2026-11-29T21:00:00.000-08:00",
    selfLink: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}/operations/operation-1`,
    ...extra,
  };
}

function gceInstance(instanceName: string, status: string, labels: Record<string, string>, natIP?: string) {
  return {
    kind: "compute#instance",
    id: "1234567890123456789",
    name: instanceName,
    zone: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}`,
    machineType: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}/machineTypes/e2-small`,
    status,
    labels,
    networkInterfaces: [
      {
        kind: "compute#networkInterface",
        name: "nic0",
        network: `https://www.googleapis.com/compute/v1/projects/${project}/global/networks/default`,
        networkIP: "10.132.0.7",
        accessConfigs: [
          {
            kind: "compute#accessConfig",
            type: "ONE_TO_ONE_NAT",
            name: "External NAT",
            networkTier: "PREMIUM",
            ...(natIP ? { natIP } : {}),
          },
        ],
      },
    ],
  };
}

const googleError = (code: number, reason: string, message: string, status: string) => ({
  error: { code, message, errors: [{ message, domain: "global", reason }], status },
});

describe("GCE provider against a local Compute API", () => {
  it("insert → get Provisioning → get Running with natIP", async () => {
    let status = "PROVISIONING";
    compute = (req) => {
      if (req.method === "POST" && req.path === instancesPath)
        return { status: 200, body: operation("insert", name) };
      if (req.method === "GET" && req.path === `${instancesPath}/${name}`) {
        return {
          status: 200,
          body: gceInstance(name, status, storedLabels, status === "RUNNING" ? "34.76.1.2" : undefined),
        };
      }
      return { status: 404, body: googleError(404, "notFound", "not found", "NOT_FOUND") };
    };

    const created = await provider.create(createRequest);
    expect(created).toEqual({
      id: `gce://${project}/${zone}/${name}`,
      state: "Provisioning",
      tags: { team: "web", "crawl.kubefn.dev/proxy-uid": uid, "crawl.kubefn.dev/managed-by": "kubefn" },
    });
    expect(apiCalls[0]!.body).toEqual({
      name,
      machineType: `zones/${zone}/machineTypes/e2-small`,
      disks: [
        {
          boot: true,
          autoDelete: true,
          initializeParams: { sourceImage: "projects/debian-cloud/global/images/family/debian-12" },
        },
      ],
      // The operator's network, its tags for the firewall rules; the external address stays.
      networkInterfaces: [
        {
          network: "global/networks/crawl-proxies",
          accessConfigs: [{ type: "ONE_TO_ONE_NAT", name: "External NAT" }],
        },
      ],
      tags: { items: ["kubefn-proxy"] },
      serviceAccounts: [],
      labels: storedLabels,
      metadata: {
        items: [
          { key: "block-project-ssh-keys", value: "TRUE" },
          { key: "user-data", value: createRequest.cloudInit },
        ],
      },
    });

    expect(await provider.get(created.id, uid)).toMatchObject({ state: "Provisioning" });
    expect((await provider.get(created.id, uid)).ip).toBeUndefined();
    status = "STAGING";
    expect(await provider.get(created.id, uid)).toMatchObject({ state: "Provisioning" });
    status = "RUNNING";
    expect(await provider.get(created.id, uid)).toMatchObject({ state: "Running", ip: "34.76.1.2" });
    expect(tokenCalls).toBe(1);
    expect(authFailures).toEqual([]);
  });

  it("insert of an existing name adopts our instance and refuses a foreign one", async () => {
    let labels: Record<string, string> = storedLabels;
    compute = (req) => {
      if (req.method === "POST") {
        return {
          status: 409,
          body: googleError(
            409,
            "alreadyExists",
            `The resource '${req.path}/${name}' already exists`,
            "ALREADY_EXISTS",
          ),
        };
      }
      return { status: 200, body: gceInstance(name, "RUNNING", labels, "34.76.1.2") };
    };
    expect(await provider.create(createRequest)).toMatchObject({ state: "Running", ip: "34.76.1.2" });

    labels = { "crawl_kubefn_dev_proxy-uid": "someone-else" };
    await expect(provider.create(createRequest)).rejects.toMatchObject({
      errorClass: "permanent",
      reason: "NameConflict",
    });
  });

  it("get of a missing instance is ProviderNotFoundError; delete tolerates 404", async () => {
    compute = (req) =>
      req.method === "DELETE" || req.method === "GET"
        ? {
            status: 404,
            body: googleError(404, "notFound", `The resource '${req.path}' was not found`, "NOT_FOUND"),
          }
        : { status: 500 };
    await expect(provider.get(`gce://${project}/${zone}/${name}`, uid)).rejects.toBeInstanceOf(
      ProviderNotFoundError,
    );
    await expect(
      provider.delete(`gce://${project}/${zone}/${name}`, { owner: uid }),
    ).resolves.toBeUndefined();
    // delete reads first; a missing instance needs no DELETE.
    expect(apiCalls.map((c) => `${c.method} ${c.path}`)).toEqual([
      `GET ${instancesPath}/${name}`,
      `GET ${instancesPath}/${name}`,
    ]);
  });

  it("delete of an existing instance reads it, then succeeds on the Operation", async () => {
    compute = (req) =>
      req.method === "GET"
        ? { status: 200, body: gceInstance(name, "RUNNING", storedLabels, "34.76.1.2") }
        : { status: 200, body: operation("delete", req.path.split("/").at(-1)!) };
    await expect(
      provider.delete(`gce://${project}/${zone}/${name}`, { owner: uid }),
    ).resolves.toBeUndefined();
    expect(apiCalls[0]).toMatchObject({ method: "GET", path: `${instancesPath}/${name}` });
    expect(apiCalls[1]).toMatchObject({ method: "DELETE", path: `${instancesPath}/${name}` });
  });

  it("a providerID naming another Proxy's VM is not followed: get is NotFound, delete does nothing", async () => {
    const other = "9b8c7d6e-0000-4000-8000-000000000001";
    compute = () => ({ status: 200, body: gceInstance(name, "RUNNING", storedLabels, "34.76.1.2") });
    const id = `gce://${project}/${zone}/${name}`;
    await expect(provider.get(id, other)).rejects.toBeInstanceOf(ProviderNotFoundError);
    await expect(provider.delete(id, { owner: other })).resolves.toBeUndefined();
    expect(apiCalls.filter((c) => c.method === "DELETE")).toEqual([]);
  });

  it("listByTag filters by label and follows nextPageToken", async () => {
    compute = (req) => {
      expect(req.method).toBe("GET");
      expect(req.path).toBe(instancesPath);
      expect(req.query.get("filter")).toBe('labels.crawl_kubefn_dev_managed-by="kubefn"');
      if (!req.query.get("pageToken")) {
        return {
          status: 200,
          body: {
            kind: "compute#instanceList",
            id: `projects/${project}/zones/${zone}/instances`,
            items: [gceInstance("px-a", "RUNNING", storedLabels, "34.0.0.1")],
            nextPageToken: "CkQI-page-2",
            selfLink: `https://www.googleapis.com/compute/v1/projects/${project}/zones/${zone}/instances`,
          },
        };
      }
      expect(req.query.get("pageToken")).toBe("CkQI-page-2");
      return {
        status: 200,
        body: { kind: "compute#instanceList", items: [gceInstance("px-b", "TERMINATED", storedLabels)] },
      };
    };
    const found = await provider.listByTag({ key: "crawl.kubefn.dev/managed-by", value: "kubefn" });
    expect(found.map((i) => [i.id, i.state, i.ip])).toEqual([
      [`gce://${project}/${zone}/px-a`, "Running", "34.0.0.1"],
      [`gce://${project}/${zone}/px-b`, "Stopped", undefined],
    ]);
    expect(apiCalls).toHaveLength(2);
  });

  it("an empty list answer (no items) is no instances", async () => {
    compute = () => ({ status: 200, body: { kind: "compute#instanceList", id: "x" } });
    expect(await provider.listByTag({ key: "crawl.kubefn.dev/proxy-uid", value: uid })).toEqual([]);
  });

  it.each<{
    name: string;
    answer: { status: number; body?: unknown; headers?: Record<string, string> };
    errorClass: string;
    reason: string;
  }>([
    {
      name: "quota on insert",
      answer: {
        status: 403,
        body: googleError(
          403,
          "quotaExceeded",
          "Quota 'CPUS' exceeded.  Limit: 8.0 in region europe-west1.",
          "PERMISSION_DENIED",
        ),
      },
      errorClass: "quota",
      reason: "QuotaExceeded",
    },
    {
      name: "quota in the Operation",
      answer: {
        status: 200,
        body: operation("insert", name, {
          status: "DONE",
          httpErrorStatusCode: 403,
          httpErrorMessage: "FORBIDDEN",
          error: {
            errors: [
              {
                code: "QUOTA_EXCEEDED",
                message: "Quota 'IN_USE_ADDRESSES' exceeded.  Limit: 8.0 in region europe-west1.",
              },
            ],
          },
        }),
      },
      errorClass: "quota",
      reason: "QuotaExceeded",
    },
    {
      name: "invalid machine type",
      answer: {
        status: 400,
        body: googleError(
          400,
          "invalid",
          `Invalid value for field 'resource.machineType': 'zones/${zone}/machineTypes/e2-small'. Machine type with name 'e2-small' does not exist in zone '${zone}'.`,
          "INVALID_ARGUMENT",
        ),
      },
      errorClass: "permanent",
      reason: "Invalid",
    },
    {
      name: "503",
      answer: {
        status: 503,
        body: googleError(503, "backendError", "Backend Error", "UNAVAILABLE"),
        headers: { "retry-after": "5" },
      },
      errorClass: "transient",
      reason: "Unavailable",
    },
  ])("$name → $errorClass/$reason", async ({ answer, errorClass, reason }) => {
    compute = () => answer;
    const err = await provider.create(createRequest).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ errorClass, reason });
  });

  it("503 carries Retry-After", async () => {
    compute = () => ({ status: 503, headers: { "retry-after": "5" } });
    await expect(provider.get(`gce://${project}/${zone}/${name}`, uid)).rejects.toMatchObject({
      retryAfterSeconds: 5,
    });
  });

  it("a refused connection is transient", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const offline = createGceProvider({
      project,
      zone,
      baseUrl: `http://127.0.0.1:${port}/compute/v1`,
      tokenSource: { token: async () => "t", invalidate: () => {} },
    });
    await expect(offline.get(`gce://${project}/${zone}/${name}`, uid)).rejects.toMatchObject({
      errorClass: "transient",
      reason: "NetworkError",
    });
  });

  it("reuses the token until shortly before expiry, then fetches a new one", async () => {
    compute = () => ({ status: 200, body: gceInstance(name, "RUNNING", storedLabels, "34.76.1.2") });
    const id = `gce://${project}/${zone}/${name}`;
    await provider.get(id, uid);
    await provider.get(id, uid);
    now = new Date(now.getTime() + 3000 * 1000);
    await provider.get(id, uid);
    expect(tokenCalls).toBe(1);

    // expires_in 3599 s: within the last minute the token is replaced.
    now = new Date(Date.parse("2026-11-30T05:00:00Z") + 3540 * 1000);
    await provider.get(id, uid);
    expect(tokenCalls).toBe(2);
    await provider.get(id, uid);
    expect(tokenCalls).toBe(2);
    expect(authFailures).toEqual([]);
    expect(apiCalls).toHaveLength(5);
  });

  it("a 401 drops the cached token so the next call gets a fresh one", async () => {
    compute = () => ({ status: 200, body: gceInstance(name, "RUNNING", storedLabels, "34.76.1.2") });
    const id = `gce://${project}/${zone}/${name}`;
    await provider.get(id, uid);
    issued.push("ya29.revoked-elsewhere");
    await expect(provider.get(id, uid)).rejects.toMatchObject({
      errorClass: "transient",
      reason: "Unauthenticated",
    });
    await expect(provider.get(id, uid)).resolves.toMatchObject({ state: "Running" });
    expect(tokenCalls).toBe(2);
  });
});
