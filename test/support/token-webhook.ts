/**
 * A token-review webhook (kube-apiserver `--authentication-token-webhook-config-file`) standing in
 * for the cloud authenticators, on loopback HTTPS with a self-signed certificate. An API server
 * has one such webhook, so it dispatches by the token's form:
 *
 * - `k8s-aws-v1.<base64url URL>`, an EKS token: checked as aws-iam-authenticator does, except that
 *   the SigV4 signature is recomputed here with the secret key the test says moto issued for the
 *   token's access key (moto checks no signature, and a presigned URL sent to it verbatim lands in
 *   its S3 mock and answers 200, so forwarding would accept anything). Only a token whose signature,
 *   host, action, cluster header, session token and age pass is taken to moto, to learn whose
 *   role it is (`GetCallerIdentity` as that access key); the role ARN is mapped to a username.
 * - anything else, a Google OAuth access token: the GCE-shaped server's `tokeninfo` says whose it
 *   is; the service account's email is mapped to a username.
 *
 * Every review is recorded (`reviews`), so a test can assert that no kubefn token was refused.
 */
import { spawnSync } from "node:child_process";
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { REGION, TEST_CREDENTIALS } from "./moto.ts";

/** What EKS would map a caller to (an access entry, an `aws-auth` row). */
export interface MappedUser {
  username: string;
  groups?: string[];
}

/** Credentials moto issued (the AssumeRole answer the test kept). */
export interface IssuedCredentials {
  secretAccessKey: string;
  sessionToken?: string;
}

export interface TokenWebhookOptions {
  /** A directory for the certificate, key and the API server's webhook kubeconfig. */
  dir: string;
  /** The EKS side; absent, EKS tokens are refused. */
  eks?: {
    /** The cluster's name: the `x-k8s-aws-id` header the signature must cover. */
    clusterName: string;
    /** moto's endpoint, asked who an access key belongs to once its signature verified. */
    stsEndpoint: string;
    /** Secret keys by access key ID, as moto issued them. */
    credentials: Map<string, IssuedCredentials>;
    /** Role ARN (`arn:aws:iam::<account>:role/<name>`) → user. */
    roles: Map<string, MappedUser>;
    /** How long after its `X-Amz-Date` a token is accepted, default 900 s (EKS's 15 minutes). */
    validitySeconds?: number;
  };
  /** The Google side; absent, other tokens are refused. */
  google?: {
    /** `GET <tokeninfoUrl>?access_token=...` answers `{ email, expires_in }` or 400. */
    tokeninfoUrl: string;
    /** Service-account email → user. */
    accounts: Map<string, MappedUser>;
  };
  now?: () => number;
}

export interface Review {
  form: "eks" | "google";
  authenticated: boolean;
  /** The username on success, the reason otherwise. */
  detail: string;
}

export interface TokenWebhook {
  url: string;
  /** Path of the kubeconfig to pass as `--authentication-token-webhook-config-file`. */
  kubeconfig: string;
  reviews: Review[];
  close(): Promise<void>;
}

/** Starts the webhook on a free loopback port. */
export async function startTokenWebhook(options: TokenWebhookOptions): Promise<TokenWebhook> {
  const { cert, key } = selfSignedCertificate(options.dir);
  const reviews: Review[] = [];
  const now = options.now ?? Date.now;
  const server = createServer({ cert, key }, (req, res) => {
    void (async () => {
      const review = JSON.parse(await readBody(req)) as { apiVersion?: string; spec?: { token?: string } };
      const token = review.spec?.token ?? "";
      const form = token.startsWith("k8s-aws-v1.") ? "eks" : "google";
      let status: Record<string, unknown>;
      try {
        const user =
          form === "eks"
            ? await reviewEksToken(token, options.eks, now())
            : await reviewGoogle(token, options.google);
        reviews.push({ form, authenticated: true, detail: user.username });
        status = { authenticated: true, user: { username: user.username, groups: user.groups ?? [] } };
      } catch (err) {
        reviews.push({ form, authenticated: false, detail: (err as Error).message });
        status = { authenticated: false, error: (err as Error).message };
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          apiVersion: review.apiVersion ?? "authentication.k8s.io/v1",
          kind: "TokenReview",
          status,
        }),
      );
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/review`;
  const kubeconfig = join(options.dir, "token-webhook.kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "token-webhook",
          cluster: { server: url, "certificate-authority-data": Buffer.from(cert).toString("base64") },
        },
      ],
      users: [{ name: "apiserver", user: {} }],
      contexts: [{ name: "webhook", context: { cluster: "token-webhook", user: "apiserver" } }],
      "current-context": "webhook",
    }),
  );
  return {
    url,
    kubeconfig,
    reviews,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A certificate for 127.0.0.1 that is its own CA (the webhook kubeconfig trusts it alone). */
function selfSignedCertificate(dir: string): { cert: string; key: string } {
  const certFile = join(dir, "token-webhook.crt");
  const keyFile = join(dir, "token-webhook.key");
  const out = spawnSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-days", "1", "-subj", "/CN=token-webhook", "-addext", "subjectAltName=IP:127.0.0.1"],
      ...["-keyout", keyFile, "-out", certFile],
    ],
    { encoding: "utf8" },
  );
  if (out.status !== 0) throw new Error(`openssl failed: ${out.stderr}`);
  return { cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const stsHost = /^sts(\.[a-z0-9-]+)?\.amazonaws\.com$/;

/**
 * aws-iam-authenticator's checks on an EKS token, with the signature verified here. Throws the
 * reason for a refusal.
 */
async function reviewEksToken(
  token: string,
  eks: TokenWebhookOptions["eks"],
  nowMs: number,
): Promise<MappedUser> {
  if (!eks) throw new Error("EKS tokens are not accepted here");
  let url: URL;
  try {
    url = new URL(Buffer.from(token.slice("k8s-aws-v1.".length), "base64url").toString("utf8"));
  } catch {
    throw new Error("not a URL");
  }
  if (url.protocol !== "https:" || !stsHost.test(url.hostname) || url.port !== "")
    throw new Error(`not an STS URL: ${url.host}`);
  if (url.pathname !== "/") throw new Error("path is not /");
  const q = url.searchParams;
  if (q.get("Action") !== "GetCallerIdentity" || q.get("Version") !== "2011-06-15")
    throw new Error("not GetCallerIdentity");
  if (q.get("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256") throw new Error("not SigV4");
  const signedHeaders = (q.get("X-Amz-SignedHeaders") ?? "").split(";");
  if (!signedHeaders.includes("x-k8s-aws-id")) throw new Error("x-k8s-aws-id is not signed");
  if (signedHeaders.some((h) => h !== "host" && h !== "x-k8s-aws-id"))
    throw new Error(`unexpected signed headers ${signedHeaders.join(";")}`);
  const [accessKeyId, scopeDate, region, service, terminator] = (q.get("X-Amz-Credential") ?? "").split("/");
  if (!accessKeyId || !scopeDate || !region || service !== "sts" || terminator !== "aws4_request")
    throw new Error("bad credential scope");
  const amzDate = q.get("X-Amz-Date") ?? "";
  const signedAt = parseAmzDate(amzDate);
  if (signedAt === undefined || !amzDate.startsWith(scopeDate)) throw new Error("bad X-Amz-Date");
  const validityMs = (eks.validitySeconds ?? 900) * 1000;
  if (nowMs > signedAt + validityMs) throw new Error(`expired: signed ${amzDate}`);
  if (signedAt > nowMs + 60_000) throw new Error(`signed in the future: ${amzDate}`);

  const issued = eks.credentials.get(accessKeyId);
  if (!issued) throw new Error(`unknown access key ${accessKeyId}`);
  if ((q.get("X-Amz-Security-Token") ?? undefined) !== issued.sessionToken)
    throw new Error("session token does not belong to the access key");
  const headerValues: Record<string, string> = { host: url.host, "x-k8s-aws-id": eks.clusterName };
  const canonicalQuery = [...q.entries()]
    .filter(([k]) => k !== "X-Amz-Signature")
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const canonicalRequest = [
    "GET",
    "/",
    canonicalQuery,
    signedHeaders.map((h) => `${h}:${headerValues[h]}\n`).join(""),
    signedHeaders.join(";"),
    // STS hashes the GET's empty body (UNSIGNED-PAYLOAD is S3's alone).
    sha256Hex(""),
  ].join("\n");
  const scope = `${scopeDate}/${region}/sts/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonicalRequest)].join("\n");
  let signingKey: Buffer = Buffer.from(`AWS4${issued.secretAccessKey}`, "utf8");
  for (const part of [scopeDate, region, "sts", "aws4_request"]) signingKey = hmac(signingKey, part);
  const expected = hmac(signingKey, stringToSign);
  const given = Buffer.from(q.get("X-Amz-Signature") ?? "", "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new Error("signature does not match");

  const arn = await callerArn(eks.stsEndpoint, accessKeyId, region);
  // arn:aws:sts::<account>:assumed-role/<role>/<session> → arn:aws:iam::<account>:role/<role>
  const m = /^arn:aws:sts::(\d+):assumed-role\/([^/]+)\/[^/]+$/.exec(arn);
  const roleArn = m ? `arn:aws:iam::${m[1]}:role/${m[2]}` : arn;
  const user = eks.roles.get(roleArn);
  if (!user) throw new Error(`no access entry for ${roleArn}`);
  return user;
}

/** moto's GetCallerIdentity as `accessKeyId` (moto reads the key from the Authorization header). */
async function callerArn(endpoint: string, accessKeyId: string, region: string): Promise<string> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `AWS4-HMAC-SHA256 Credential=${accessKeyId}/20000101/${region}/sts/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: "Action=GetCallerIdentity&Version=2011-06-15",
  });
  const text = await res.text();
  const arn = /<Arn>([^<]+)<\/Arn>/.exec(text)?.[1];
  if (!res.ok || !arn) throw new Error(`GetCallerIdentity: HTTP ${res.status}`);
  return arn;
}

async function reviewGoogle(token: string, google: TokenWebhookOptions["google"]): Promise<MappedUser> {
  if (!google) throw new Error("Google tokens are not accepted here");
  const res = await fetch(`${google.tokeninfoUrl}?access_token=${encodeURIComponent(token)}`);
  const body = (await res.json().catch(() => ({}))) as { email?: string };
  if (!res.ok || !body.email) throw new Error(`tokeninfo: HTTP ${res.status}`);
  const user = google.accounts.get(body.email);
  if (!user) throw new Error(`no mapping for ${body.email}`);
  return user;
}

function parseAmzDate(s: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) return undefined;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
}

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function sha256Hex(s: string): string {
  return createHash("sha256").update(s, "utf8").digest("hex");
}

function hmac(key: Buffer, data: string): Buffer {
  return createHmac("sha256", key).update(data, "utf8").digest();
}

/**
 * moto's AssumeRole for `roleArn` (the session a Lambda function's role gives it). Not signed:
 * moto checks no signature and routes by the credential scope's service. Throws when moto's
 * answer holds no credentials.
 */
export async function assumeRoleAtMoto(
  endpoint: string,
  roleArn: string,
): Promise<{ accessKeyId: string; secretAccessKey: string; sessionToken: string }> {
  const res = await fetch(endpoint, {
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
  if (!creds.accessKeyId) throw new Error(`moto's AssumeRole gave no credentials: ${xml.slice(0, 300)}`);
  return creds;
}
