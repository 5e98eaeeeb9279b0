/**
 * Issue 19, items 4 and 5: kubefn authenticates as a cloud identity, with no kubeconfig and no
 * token a person renews. A devcluster of this file's own authenticates through one token-review
 * webhook (test/support/token-webhook.ts) that tells the two forms apart:
 *
 * - Lambda → EKS as the function's IAM role: the webhook checks the EKS token as
 *   aws-iam-authenticator does, but recomputes the SigV4 signature itself with the secret key
 *   moto issued at AssumeRole (moto checks no signatures), asks moto whose access key it is only
 *   then, and maps the role to a username as an EKS access entry does.
 * - Lambda and Workers → GKE with a Google service account's access tokens, from the GCE
 *   provider's token source: the webhook asks the GCE-shaped server's tokeninfo whose token it is.
 *
 * Tokens here live 20 s (EKS: 15 minutes, Google: an hour); kubefn renews EKS tokens every 8 s
 * and Google tokens at half their life, so kubefn with renewal switched off is refused within
 * the minute the renewal test runs.
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createTestHarness } from "wrangler";
import { clusterKube, endpointKubeConfig } from "../../functions/aws/cluster.ts";
import { parseAwsEnv } from "../../functions/aws/config.ts";
import { type AwsCredentials, mintEksToken } from "../../functions/aws/eks-token.ts";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { workerTransport } from "../../functions/cloudflare/kube-transport.ts";
import {
  createKube,
  type Kube,
  type KubeObject,
  type Resource,
  UnauthorizedError,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { type GceServer, startGceServer } from "../e2e/gce-server.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { type Moto, REGION, startMoto } from "../support/moto.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import { tempDir } from "../support/temp-dir.ts";
import {
  assumeRoleAtMoto,
  type IssuedCredentials,
  startTokenWebhook,
  type TokenWebhook,
} from "../support/token-webhook.ts";

const clusterName = "kubefn-test";
const account = "123456789012";
const kubefnRole = `arn:aws:iam::${account}:role/kubefn-lambda`;
const unmappedRole = `arn:aws:iam::${account}:role/someone-else`;
const kubefnUsername = "system:serviceaccount:kubefn-system:kubefn";
const validitySeconds = 20;
const googleProject = "kubefn-gke";
const googleAccount = `kubefn@${googleProject}.iam.gserviceaccount.com`;

const selfSubjectReviews: Resource = {
  group: "authentication.k8s.io",
  version: "v1",
  resource: "selfsubjectreviews",
  kind: "SelfSubjectReview",
  namespaced: false,
};

let moto: Moto;
let gce: GceServer;
let webhook: TokenWebhook;
let cluster: OwnDevcluster;
const dir = tempDir("eks-token-");
const issued = new Map<string, IssuedCredentials>();
let kubefnCreds: AwsCredentials;
let otherCreds: AwsCredentials;

/** moto's AssumeRole for `roleArn`, its answer kept for the webhook. */
async function assumeRole(roleArn: string): Promise<AwsCredentials> {
  const creds = await assumeRoleAtMoto(moto.endpoint, roleArn);
  expect(creds.accessKeyId).not.toBe("");
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
  const kc = endpointKubeConfig(cluster.server, cluster.caData);
  return createKube(
    createNodeTransport(kc, { tokenSource: { token: async () => token, renew: async () => undefined } }),
  );
}

/** The Lambda's environment on GKE: the service account's key (from Secrets Manager) and the cluster. */
function lambdaGoogleEnv(): Record<string, string> {
  return {
    AWS_REGION: REGION,
    QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/kubefn",
    KUBE_GOOGLE_CREDENTIALS: gce.credentials,
    KUBE_SERVER: cluster.server,
    KUBE_CA_DATA: cluster.caData,
  };
}

/** The Worker's Kube (functions/cloudflare/kube-transport.ts) with the service account's key as its secret. */
function workerKube(): Kube {
  // Workers trust only public CAs: the Worker reaches the devcluster through its plain-HTTP pass-through.
  const config = parseWorkerEnv({ KUBE_SERVER: cluster.httpProxy, KUBE_GOOGLE_CREDENTIALS: gce.credentials });
  return createKube(workerTransport(config));
}

/** The Lambda's Kube (functions/aws/cluster.ts) for `env`. */
const lambdaKube = (env: Record<string, string>) =>
  clusterKube(parseAwsEnv(env), { env, clock: { now: () => new Date() } }).kube;

beforeAll(async () => {
  moto = await startMoto();
  gce = await startGceServer(googleProject, "127.0.0.1", { tokenLifetimeSeconds: validitySeconds });
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
    google: {
      tokeninfoUrl: `${gce.url}/tokeninfo`,
      accounts: new Map([[googleAccount, { username: kubefnUsername, groups: ["kubefn"] }]]),
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
  await gce?.close();
  dir.remove();
});

describe("Lambda → EKS as the function's role", () => {
  it("authenticates as the username the role maps to, with no kubeconfig and no secret", async () => {
    const kube = lambdaKube(lambdaEnv(kubefnCreds, 600));
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
});

describe("Lambda and Workers → GKE with a service account's access tokens", () => {
  it.each([
    ["Lambda", () => lambdaKube(lambdaGoogleEnv())],
    ["a Worker", workerKube],
  ])("%s authenticates as the username the service account maps to", async (_platform, kube) => {
    expect(await whoAmI(kube())).toBe(kubefnUsername);
    expect(webhook.reviews.at(-1)).toEqual({ form: "google", authenticated: true, detail: kubefnUsername });
  });

  it("the Worker in workerd sweeps with the service account's tokens, authenticated at every request", async () => {
    const harness = createTestHarness({
      root: new URL("../../", import.meta.url).pathname,
      workers: [
        {
          configPath: "wrangler.toml",
          vars: { KUBE_SERVER: cluster.httpProxy, PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS },
          secrets: { KUBE_GOOGLE_CREDENTIALS: gce.credentials },
        },
      ],
    });
    onTestFinished(() => harness.close());
    await harness.listen();
    const before = webhook.reviews.length;
    // This cluster has no kubefn CRDs: the sweep's lists answer 404, after authenticating.
    await harness
      .getWorker()
      .scheduled({ cron: "* * * * *", scheduledTime: new Date() })
      .catch(() => undefined);
    const reviews = webhook.reviews.slice(before);
    expect(reviews.length).toBeGreaterThan(0);
    expect(reviews.every((r) => r.form === "google" && r.authenticated && r.detail === kubefnUsername)).toBe(
      true,
    );
    expect(gce.authFailures).toEqual([]);
  });

  it("refuses a token Google never issued (401)", async () => {
    const before = webhook.reviews.length;
    await expect(whoAmI(kubeWithToken("ya29.made-up"))).rejects.toBeInstanceOf(UnauthorizedError);
    expect(webhook.reviews.slice(before)).toContainEqual({
      form: "google",
      authenticated: false,
      detail: "tokeninfo: HTTP 400",
    });
  });
});

describe("renewal", () => {
  it("every platform renews before the cluster stops accepting its token: no request refused across three lifetimes", async () => {
    const kubes = {
      "Lambda on EKS": lambdaKube(lambdaEnv(kubefnCreds, 8)),
      "Lambda on GKE": lambdaKube(lambdaGoogleEnv()),
      "a Worker on GKE": workerKube(),
    };
    const before = webhook.reviews.length;
    const until = Date.now() + 3 * validitySeconds * 1000;
    let rounds = 0;
    while (Date.now() < until) {
      for (const kube of Object.values(kubes)) expect(await whoAmI(kube)).toBe(kubefnUsername);
      rounds++;
      await new Promise((r) => setTimeout(r, 2000));
    }
    // A token used past its life is refused (401) and renewed at once, so every request above
    // succeeded either way; without renewal ahead of time there is a refusal here every 20 s.
    expect(webhook.reviews.slice(before).filter((r) => !r.authenticated)).toEqual([]);
    expect(rounds).toBeGreaterThanOrEqual(10);
  }, 120_000);
});
