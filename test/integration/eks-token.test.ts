/**
 * Issue 19, item 4: Lambda → EKS as the function's own IAM role, no kubeconfig. The devcluster's
 * API server authenticates through a token-review webhook (test/support/token-webhook.ts) that
 * checks an EKS token as aws-iam-authenticator does, but recomputes the SigV4 signature itself
 * with the secret key moto issued at AssumeRole (moto checks no signatures), asks moto whose
 * access key it is only then, and maps the role to a username as an EKS access entry does.
 *
 * Tokens here are accepted for 20 s after signing (EKS: 15 minutes) and the function renews
 * every 8 s, so a function that did not renew is refused within the minute the renewal test runs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAwsEnv } from "../../functions/aws/config.ts";
import { type AwsCredentials, eksConnection, mintEksToken } from "../../functions/aws/eks-token.ts";
import { clusterKube } from "../../functions/aws/handler.ts";
import {
  createKube,
  type Kube,
  type KubeObject,
  type Resource,
  UnauthorizedError,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { type Moto, REGION, startMoto, TEST_CREDENTIALS } from "../support/moto.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import { tempDir } from "../support/temp-dir.ts";
import { type IssuedCredentials, startTokenWebhook, type TokenWebhook } from "../support/token-webhook.ts";

const clusterName = "kubefn-test";
const account = "123456789012";
const kubefnRole = `arn:aws:iam::${account}:role/kubefn-lambda`;
const unmappedRole = `arn:aws:iam::${account}:role/someone-else`;
const kubefnUsername = "system:serviceaccount:kubefn-system:kubefn";
const validitySeconds = 20;

const selfSubjectReviews: Resource = {
  group: "authentication.k8s.io",
  version: "v1",
  resource: "selfsubjectreviews",
  kind: "SelfSubjectReview",
  namespaced: false,
};

let moto: Moto;
let webhook: TokenWebhook;
let cluster: OwnDevcluster;
const dir = tempDir("eks-token-");
const issued = new Map<string, IssuedCredentials>();
let kubefnCreds: AwsCredentials;
let otherCreds: AwsCredentials;

/**
 * moto's AssumeRole, its answer kept for the webhook. Not signed: moto checks no signature and
 * routes by the credential scope's service.
 */
async function assumeRole(roleArn: string): Promise<AwsCredentials> {
  const res = await fetch(moto.endpoint, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `AWS4-HMAC-SHA256 Credential=${TEST_CREDENTIALS.AWS_ACCESS_KEY_ID}/20000101/${REGION}/sts/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: new URLSearchParams({
      Action: "AssumeRole",
      Version: "2011-06-15",
      RoleArn: roleArn,
      RoleSessionName: "lambda",
    }).toString(),
  });
  const xml = await res.text();
  const field = (name: string) => new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml)?.[1] ?? "";
  const creds = {
    accessKeyId: field("AccessKeyId"),
    secretAccessKey: field("SecretAccessKey"),
    sessionToken: field("SessionToken"),
  };
  expect(creds.accessKeyId, xml).not.toBe("");
  issued.set(creds.accessKeyId, { secretAccessKey: creds.secretAccessKey, sessionToken: creds.sessionToken });
  return creds;
}

/** The Lambda's environment on EKS: the role's session (as Lambda sets it) and the cluster, no kubeconfig. */
function lambdaEnv(creds: AwsCredentials, renewSeconds: number): Record<string, string> {
  return {
    AWS_REGION: REGION,
    QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
    EKS_CLUSTER_NAME: clusterName,
    KUBE_SERVER: cluster.server,
    KUBE_CA_DATA: cluster.caData,
    EKS_TOKEN_RENEW_SECONDS: String(renewSeconds),
    AWS_ACCESS_KEY_ID: creds.accessKeyId,
    AWS_SECRET_ACCESS_KEY: creds.secretAccessKey,
    ...(creds.sessionToken ? { AWS_SESSION_TOKEN: creds.sessionToken } : {}),
  };
}

async function whoAmI(kube: Kube): Promise<string | undefined> {
  const review = await kube.create<KubeObject & { status?: { userInfo?: { username?: string } } }>(
    selfSubjectReviews,
    { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview", metadata: {} },
  );
  return review.status?.userInfo?.username;
}

/** A Kube that sends `token` and nothing else (no renewal). */
function kubeWithToken(token: string): Kube {
  const config = parseAwsEnv(lambdaEnv(kubefnCreds, 600));
  if (!("eks" in config.kubeconfig)) throw new Error("not EKS");
  const { kc } = eksConnection(config.kubeconfig.eks, REGION, async () => kubefnCreds);
  return createKube(
    createNodeTransport(kc, { tokenSource: { token: async () => token, renew: async () => undefined } }),
  );
}

beforeAll(async () => {
  moto = await startMoto();
  kubefnCreds = await assumeRole(kubefnRole);
  otherCreds = await assumeRole(unmappedRole);
  webhook = await startTokenWebhook({
    dir: dir.path,
    eks: {
      clusterName,
      stsEndpoint: moto.endpoint,
      credentials: issued,
      roles: new Map([[kubefnRole, { username: kubefnUsername, groups: ["kubefn"] }]]),
      validitySeconds,
    },
  });
  cluster = await startOwnDevcluster([
    `--authentication-token-webhook-config-file=${webhook.kubeconfig}`,
    "--authentication-token-webhook-version=v1",
    "--authentication-token-webhook-cache-ttl=1s",
  ]);
});

afterAll(async () => {
  await cluster?.close();
  await webhook?.close();
  await moto?.close();
  dir.remove();
});

describe("Lambda → EKS as the function's role", () => {
  it("authenticates as the username the role maps to, with no kubeconfig and no secret", async () => {
    const { kube } = clusterKube(parseAwsEnv(lambdaEnv(kubefnCreds, 600)), lambdaEnv(kubefnCreds, 600));
    expect(await whoAmI(kube)).toBe(kubefnUsername);
    expect(webhook.reviews.at(-1)).toEqual({ form: "eks", authenticated: true, detail: kubefnUsername });
  });

  it.each<[string, () => Promise<string>, RegExp]>([
    [
      "a token for another cluster",
      () =>
        mintEksToken({
          clusterName: "another-cluster",
          region: REGION,
          credentials: async () => kubefnCreds,
        }),
      /signature does not match/,
    ],
    [
      "a token signed with a made-up secret key for the role's access key (moto would answer 200)",
      () =>
        mintEksToken({
          clusterName,
          region: REGION,
          credentials: async () => ({ ...kubefnCreds, secretAccessKey: "not-the-issued-secret" }),
        }),
      /signature does not match/,
    ],
    [
      "a token older than its validity",
      () =>
        mintEksToken({
          clusterName,
          region: REGION,
          credentials: async () => kubefnCreds,
          now: () => Date.now() - (validitySeconds + 5) * 1000,
        }),
      /expired/,
    ],
    [
      "a presigned URL for another host (S3), validly signed",
      async () => {
        const sts = await mintEksToken({ clusterName, region: REGION, credentials: async () => kubefnCreds });
        const url = Buffer.from(sts.slice(11), "base64url")
          .toString()
          .replace("sts.us-east-1", "s3.us-east-1");
        return `k8s-aws-v1.${Buffer.from(url).toString("base64url")}`;
      },
      /not an STS URL/,
    ],
    [
      "a role no access entry names, validly signed",
      () => mintEksToken({ clusterName, region: REGION, credentials: async () => otherCreds }),
      /no access entry/,
    ],
  ])("refuses %s (401)", async (_name, token, reason) => {
    const before = webhook.reviews.length;
    await expect(whoAmI(kubeWithToken(await token()))).rejects.toBeInstanceOf(UnauthorizedError);
    const refusal = webhook.reviews.slice(before).find((r) => !r.authenticated);
    expect(refusal?.detail).toMatch(reason);
  });

  it("renews its token before the cluster stops accepting it: no request refused across three validity periods", async () => {
    const env = lambdaEnv(kubefnCreds, 8);
    const { kube } = clusterKube(parseAwsEnv(env), env);
    const before = webhook.reviews.length;
    const until = Date.now() + 3 * validitySeconds * 1000;
    let requests = 0;
    while (Date.now() < until) {
      expect(await whoAmI(kube)).toBe(kubefnUsername);
      requests++;
      await new Promise((r) => setTimeout(r, 2000));
    }
    const reviews = webhook.reviews.slice(before);
    // A token used past its validity is refused (401) and renewed at once; with no renewal ahead
    // of time there would be a refusal here every 20 s.
    expect(reviews.filter((r) => !r.authenticated)).toEqual([]);
    expect(requests).toBeGreaterThanOrEqual(10);
  }, 120_000);
});
