import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { signBatch } from "../../shared/app/intake/index.ts";
import { createRegistry } from "../../shared/runtime/index.ts";
import { FakeKube } from "../../test/support/fake-kube.ts";
import { type Moto, startMoto, TEST_CREDENTIALS } from "../../test/support/moto.ts";
import { proxyController } from "../../test/unit/runtime/controllers.ts";
import { parseAwsEnv } from "./config.ts";
import { createHandler } from "./handler.ts";
import { AwsSecretError, INTAKE_SECRETS_REREAD_MS, resolveSecretEnv } from "./secrets.ts";

// moto's server (test/support/moto.ts) emulates Secrets Manager on a free loopback port.
const REGION = "us-east-1";
const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://203.0.113.10:6443" } }]
users: [{ name: u, user: { token: secret-token-from-the-store } }]
contexts: [{ name: c, context: { cluster: c, user: u } }]
current-context: c
`;
const GCE_KEY = JSON.stringify({
  client_email: "kubefn@p.iam.gserviceaccount.com",
  private_key: "-----BEGIN PRIVATE KEY-----\nMIIsecretbytes\n-----END PRIVATE KEY-----\n",
});
const BASE_ENV = {
  AWS_REGION: REGION,
  QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
};

let moto: Moto;
let endpoint: string;
let client: SecretsManagerClient;

beforeAll(async () => {
  moto = await startMoto();
  endpoint = moto.endpoint;
  // The loader uses the SDK's default credential chain, as on Lambda: dummy keys from the environment.
  for (const [k, v] of Object.entries(TEST_CREDENTIALS)) vi.stubEnv(k, v);
  client = new SecretsManagerClient({ region: REGION, endpoint });
}, 30_000);

afterAll(async () => {
  vi.unstubAllEnvs();
  client?.destroy();
  await moto?.close();
});

async function createSecret(name: string, value: string): Promise<string> {
  const out = await client.send(new CreateSecretCommand({ Name: name, SecretString: value }));
  return out.ARN as string;
}

describe("the Lambda's secrets come from Secrets Manager at cold start (moto's server)", () => {
  it("fills KUBECONFIG_BASE64 and GCE_CREDENTIALS from the secrets the ARN variables name", async () => {
    const kubeArn = await createSecret("kubefn/kubeconfig", Buffer.from(KUBECONFIG).toString("base64"));
    const gceArn = await createSecret("kubefn/gce", GCE_KEY);
    const env = {
      ...BASE_ENV,
      KUBECONFIG_SECRET_ARN: kubeArn,
      GCE_CREDENTIALS_SECRET_ARN: gceArn,
      GCE_PROJECT: "p",
      GCE_ZONES: "europe-west1-b",
      GCE_NETWORK: "crawl-proxies",
    };
    const resolved = await resolveSecretEnv(env, { endpoint });
    expect(resolved.GCE_CREDENTIALS).toBe(GCE_KEY);
    const config = parseAwsEnv(resolved);
    expect(config.kubeconfig).toEqual({ yaml: KUBECONFIG });
    expect(env).not.toHaveProperty("KUBECONFIG_BASE64");
  });

  it("fills API_TOKEN and OIDC_SIGNING_KEY from their secrets: neither sits in the function's configuration", async () => {
    const apiArn = await createSecret("kubefn/api-token", "api-token-0123456789abcdef");
    const keyArn = await createSecret(
      "kubefn/oidc-signing-key",
      "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n",
    );
    const env = { ...BASE_ENV, API_TOKEN_SECRET_ARN: apiArn, OIDC_SIGNING_KEY_SECRET_ARN: keyArn };
    const resolved = await resolveSecretEnv(env, { endpoint });
    expect(resolved.API_TOKEN).toBe("api-token-0123456789abcdef");
    expect(resolved.OIDC_SIGNING_KEY).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(
      parseAwsEnv({
        ...BASE_ENV,
        KUBECONFIG_BASE64: Buffer.from(KUBECONFIG).toString("base64"),
        API_TOKEN: resolved.API_TOKEN,
      }).apiToken,
    ).toBe("api-token-0123456789abcdef");
    expect(env).not.toHaveProperty("API_TOKEN");
  });

  it("a missing secret is a clear error naming the variable and the ARN", async () => {
    const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kubefn/absent-AbCdEf";
    const err = await resolveSecretEnv({ ...BASE_ENV, KUBECONFIG_SECRET_ARN: arn }, { endpoint }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(AwsSecretError);
    expect(err.message).toContain(`KUBECONFIG_SECRET_ARN: cannot read secret ${arn}`);
    expect(err.message).toContain("ResourceNotFoundException");
    expect(err.message).toContain("secretsmanager:GetSecretValue");
  });

  it("the handler builds its wiring through the loader: a missing secret fails the invoke, by name", async () => {
    const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kubefn/gone-AbCdEf";
    const handler = createHandler({ env: { ...BASE_ENV, KUBECONFIG_SECRET_ARN: arn }, endpoint });
    const sweep = { source: "aws.events", "detail-type": "Scheduled Event", detail: {} };
    const context = { invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn" } as never;
    await expect(handler(sweep, context)).rejects.toThrow(
      /KUBECONFIG_SECRET_ARN: cannot read secret .*kubefn\/gone/,
    );
  });

  it("without an ARN variable the environment is used as it is, with no AWS call", async () => {
    const env = { ...BASE_ENV, KUBECONFIG_BASE64: Buffer.from(KUBECONFIG).toString("base64") };
    expect(await resolveSecretEnv(env, { endpoint: "http://127.0.0.1:9" })).toBe(env);
  });
});

describe("the intake's audit token and relay secret rotate without a restart (moto's Secrets Manager)", () => {
  const relayBatch = JSON.stringify({ kind: "RelayBatch", apiVersion: "kubefn.dev/v1", events: [] });
  const auditBatch = JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] });
  const context = { invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn" } as never;
  const post = (body: string, headers: Record<string, string>) => ({
    version: "2.0",
    rawPath: "/v1/events",
    rawQueryString: "",
    headers: { "content-type": "application/json", ...headers },
    requestContext: { http: { method: "POST", path: "/v1/events", sourceIp: "198.51.100.20" } },
    body,
    isBase64Encoded: false,
  });

  it("re-reads both secrets after a refusal, at most once a minute: the rotated values are accepted", async () => {
    const auditArn = await createSecret("kubefn/audit-token", "audit-token-v1-0123456789");
    const relayArn = await createSecret("kubefn/relay-secret", "relay-secret-v1-0123456789");
    let now = Date.parse("2026-11-30T12:00:00Z");
    const logs: string[] = [];
    const handler = createHandler({
      env: {
        ...BASE_ENV,
        KUBECONFIG_BASE64: Buffer.from(KUBECONFIG).toString("base64"),
        AUDIT_TOKEN_SECRET_ARN: auditArn,
        RELAY_SECRET_ARN: relayArn,
      },
      endpoint,
      kube: () => new FakeKube(),
      // The batches are empty: they map to no pass, so nothing is enqueued.
      operators: () => ({ registry: createRegistry([proxyController()]), sweepTasks: [] }),
      clock: { now: () => new Date(now) },
      log: { debug() {}, info: (m) => logs.push(m), warn() {}, error: (m) => logs.push(m) },
      metrics: { count() {}, observe() {}, gauge() {} },
    });
    const relay = async (secret: string) => {
      const headers = await signBatch(secret, relayBatch, now / 1000);
      return ((await handler(post(relayBatch, headers), context)) as { statusCode: number }).statusCode;
    };
    const audit = async (token: string) =>
      (
        (await handler(post(auditBatch, { authorization: `Bearer ${token}` }), context)) as {
          statusCode: number;
        }
      ).statusCode;

    // Cold start: both read from Secrets Manager.
    expect([await relay("relay-secret-v1-0123456789"), await audit("audit-token-v1-0123456789")]).toEqual([
      202, 202,
    ]);

    await client.send(
      new PutSecretValueCommand({ SecretId: relayArn, SecretString: "relay-secret-v2-0123456789" }),
    );
    await client.send(
      new PutSecretValueCommand({ SecretId: auditArn, SecretString: "audit-token-v2-0123456789" }),
    );
    // Within a minute of the last read a refusal re-reads nothing: still the old values.
    now += INTAKE_SECRETS_REREAD_MS - 1000;
    expect(await relay("relay-secret-v2-0123456789")).toBe(401);
    expect(await relay("relay-secret-v1-0123456789")).toBe(202);

    // A minute on, the first refused requests re-read both secrets (once: the one refused while
    // the read is under way waits for it) and are answered again: accepted.
    now += 2000;
    expect(
      await Promise.all([relay("relay-secret-v2-0123456789"), audit("audit-token-v2-0123456789")]),
    ).toEqual([202, 202]);
    expect(logs.filter((m) => m.startsWith("intake credentials"))).toEqual([
      "intake credentials re-read: a secret was rotated",
    ]);
    // The old values are refused from now on, and their refusals re-read nothing for a minute.
    expect([await relay("relay-secret-v1-0123456789"), await audit("audit-token-v1-0123456789")]).toEqual([
      401, 401,
    ]);
  });

  it("a rotated value too short for the setting keeps the last good one, and says so", async () => {
    const auditArn = await createSecret("kubefn/audit-token-short", "audit-token-v1-0123456789");
    let now = Date.parse("2026-11-30T12:00:00Z");
    const errors: string[] = [];
    const handler = createHandler({
      env: {
        ...BASE_ENV,
        KUBECONFIG_BASE64: Buffer.from(KUBECONFIG).toString("base64"),
        AUDIT_TOKEN_SECRET_ARN: auditArn,
      },
      endpoint,
      kube: () => new FakeKube(),
      operators: () => ({ registry: createRegistry([proxyController()]), sweepTasks: [] }),
      clock: { now: () => new Date(now) },
      log: { debug() {}, info() {}, warn() {}, error: (m, f) => errors.push(`${m} ${JSON.stringify(f)}`) },
      metrics: { count() {}, observe() {}, gauge() {} },
    });
    const audit = async (token: string) =>
      (
        (await handler(post(auditBatch, { authorization: `Bearer ${token}` }), context)) as {
          statusCode: number;
        }
      ).statusCode;
    expect(await audit("audit-token-v1-0123456789")).toBe(202);
    await client.send(new PutSecretValueCommand({ SecretId: auditArn, SecretString: "short" }));
    now += INTAKE_SECRETS_REREAD_MS + 1000;
    expect(await audit("short")).toBe(401);
    expect(errors.join("\n")).toMatch(/AUDIT_TOKEN must be at least 16 characters/);
    expect(await audit("audit-token-v1-0123456789")).toBe(202);
  });
});
