import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createKubefnAws,
  type KubefnAws,
  type Moto,
  startMoto,
  TEST_CREDENTIALS,
} from "../../test/support/moto.ts";

const root = new URL("../../", import.meta.url);
const fixture = async (name: string): Promise<unknown> =>
  JSON.parse(await readFile(new URL(`test/fixtures/aws/${name}`, root), "utf8"));

/** The artifact infra/aws deploys: the esbuild command from docs/deploying/aws.md, run for real. */
describe("the deployed bundle (dist/aws/index.mjs)", () => {
  let dir: string;
  let moto: Moto;
  let aws: KubefnAws;
  type Entry = (event: unknown, context: unknown) => Promise<{ statusCode: number; body: string }>;
  let handler: Entry;
  let intake: Entry;
  let reconcile: Entry;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "kubefn-aws-"));
    const outfile = join(dir, "index.mjs");
    await promisify(execFile)(
      "node_modules/.bin/esbuild",
      [
        "functions/aws/handler.ts",
        "--bundle",
        "--platform=node",
        "--target=node22",
        "--format=esm",
        `--outfile=${outfile}`,
        "--log-level=error",
        "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
      ],
      { cwd: root },
    );
    moto = await startMoto();
    aws = await createKubefnAws(moto.endpoint);
    const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "https://203.0.113.10:6443" } }]
users: [{ name: u, user: { token: t } }]
contexts: [{ name: c, context: { cluster: c, user: u } }]
current-context: c
`;
    const env = {
      ...TEST_CREDENTIALS,
      AWS_REGION: "us-east-1",
      AWS_ENDPOINT_URL: moto.endpoint,
      // moto's URL: without an endpoint in the client config the SDK sends to the queue URL's host.
      QUEUE_URL: aws.queueUrl,
      KUBECONFIG_BASE64: Buffer.from(kubeconfig).toString("base64"),
      AUDIT_TOKEN: "test-audit-token-0123456789",
    };
    for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
    ({ handler, intake, reconcile } = await import(pathToFileURL(outfile).href));
  }, 60_000);

  afterAll(async () => {
    vi.unstubAllEnvs();
    aws?.close();
    await moto?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const context = { invokedFunctionArn: "arn:aws:lambda:us-east-1:111122223333:function:kubefn" };

  it("has the template's two entry points: intake answers the Function URL, reconcile refuses it", async () => {
    expect((await intake(await fixture("apigw-v1-get-healthz.json"), context)).statusCode).toBe(200);
    await expect(reconcile(await fixture("apigw-v1-get-healthz.json"), context)).rejects.toThrow(
      /the reconcile function expects/,
    );
  });

  it("answers /healthz", async () => {
    const res = await handler(await fixture("apigw-v1-get-healthz.json"), context);
    expect(res.statusCode).toBe(200);
  });

  it("takes an audit batch from a Function URL and puts it on the queue (AWS_ENDPOINT_URL honoured)", async () => {
    const res = await handler(await fixture("function-url-post-events.json"), context);
    expect(res.statusCode).toBe(202);
    const messages = await aws.deliveredMessages();
    expect(messages).toHaveLength(1);
    // The key only: the audit event's object is the sender's word and never rides along.
    expect(messages[0]).not.toHaveProperty("snapshot");
    expect(messages[0]).toMatchObject({
      request: { controller: "proxy", namespace: "ns1", name: "p1" },
      attempt: 0,
      trigger: { kind: "audit" },
    });
  });
});
