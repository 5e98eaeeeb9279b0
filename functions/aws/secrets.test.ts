import { CreateSecretCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Moto, startMoto, TEST_CREDENTIALS } from "../../test/support/moto.ts";
import { parseAwsEnv } from "./config.ts";
import { createHandler } from "./handler.ts";
import { AwsSecretError, resolveSecretEnv } from "./secrets.ts";

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
    };
    const resolved = await resolveSecretEnv(env, { endpoint });
    expect(resolved.GCE_CREDENTIALS).toBe(GCE_KEY);
    const config = parseAwsEnv(resolved);
    expect(config.kubeconfig).toEqual({ yaml: KUBECONFIG });
    expect(env).not.toHaveProperty("KUBECONFIG_BASE64");
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
