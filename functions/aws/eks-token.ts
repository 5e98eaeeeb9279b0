import { createHash, createHmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import type { TokenSource } from "../../shared/kube/index.ts";

/** What `aws eks get-token` prints before the base64url of the presigned URL. */
export const eksTokenPrefix = "k8s-aws-v1.";

/** The header naming the cluster a token is for; signed, so a token for one cluster fails at another. */
export const eksClusterHeader = "x-k8s-aws-id";

/**
 * How long kubefn uses one EKS token, default 10 minutes: EKS accepts a token for 15 minutes
 * after its `X-Amz-Date` (aws-iam-authenticator), so a token is replaced with 5 minutes to spare.
 */
export const defaultEksTokenRenewMs = 10 * 60_000;

/** The presigned URL's own `X-Amz-Expires`, as `aws eks get-token` writes it (EKS ignores it). */
const presignExpiresSeconds = 60;

/** AWS credentials: on Lambda, the function's role session (`AWS_ACCESS_KEY_ID`, ...). */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface EksTokenOptions {
  /** The EKS cluster's name, signed as the `x-k8s-aws-id` header. */
  clusterName: string;
  /** The region of the STS endpoint the URL names (`sts.<region>.amazonaws.com`). */
  region: string;
  /** The credentials to sign with, asked at each minting (they may be refreshed meanwhile). */
  credentials: () => Promise<AwsCredentials>;
  /** Milliseconds since the epoch; tests pass a fake clock. */
  now?: () => number;
}

/**
 * An EKS authentication token, exactly what `aws eks get-token --cluster-name <name>` prints:
 * `k8s-aws-v1.` and the base64url (unpadded) of a SigV4-presigned
 * `GET https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15` whose
 * signed headers include `x-k8s-aws-id: <cluster>`. EKS sends it to STS, which answers with the
 * caller's role; the cluster maps the role to a username (access entries or `aws-auth`). Minting
 * is local: a signature, no network call.
 */
export async function mintEksToken(options: EksTokenOptions): Promise<string> {
  const hostname = `sts.${options.region}.amazonaws.com`;
  const signer = new SignatureV4({
    credentials: options.credentials,
    region: options.region,
    service: "sts",
    sha256: NodeSha256,
  });
  const presigned = await signer.presign(
    {
      method: "GET",
      protocol: "https:",
      hostname,
      path: "/",
      query: { Action: "GetCallerIdentity", Version: "2011-06-15" },
      headers: { host: hostname, [eksClusterHeader]: options.clusterName },
    },
    { expiresIn: presignExpiresSeconds, signingDate: new Date((options.now ?? Date.now)()) },
  );
  const query = Object.entries(presigned.query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v.map((one) => [k, one]) : [[k, v ?? ""]]))
    .map(([k, v]) => `${encodeRfc3986(k as string)}=${encodeRfc3986(v as string)}`)
    .join("&");
  const url = `https://${hostname}/?${query}`;
  return eksTokenPrefix + Buffer.from(url, "utf8").toString("base64url");
}

export interface EksTokenSourceOptions extends EksTokenOptions {
  /** How long one token is used, default {@link defaultEksTokenRenewMs}. */
  renewAfterMs?: number;
}

/**
 * A {@link TokenSource} of EKS tokens minted from the function's own role: a token is used for
 * `renewAfterMs` and then replaced by a fresh one, and replaced at once when the API server
 * refused it (a 401). No kubeconfig, no stored secret: the cluster trusts the role.
 *
 * Caveats: the credentials must stay valid while a token is in use; a Lambda's role session does
 * for the life of its execution environment. A token minted with credentials that are revoked
 * later keeps working at EKS until its 15 minutes are up (STS verifies the signature, not the
 * session's revocation, for that long).
 */
export function eksTokenSource(options: EksTokenSourceOptions): TokenSource {
  const now = options.now ?? Date.now;
  const renewAfterMs = options.renewAfterMs ?? defaultEksTokenRenewMs;
  let current: { token: string; mintedAt: number } | undefined;
  let minting: Promise<string> | undefined;

  function mint(): Promise<string> {
    minting ??= (async () => {
      const mintedAt = now();
      const token = await mintEksToken({ ...options, now: () => mintedAt });
      current = { token, mintedAt };
      return token;
    })().finally(() => {
      minting = undefined;
    });
    return minting;
  }

  return {
    token() {
      if (current && now() - current.mintedAt < renewAfterMs) return Promise.resolve(current.token);
      return mint();
    },
    async renew(rejected) {
      if (current && current.token !== rejected) return current.token;
      const token = await mint();
      return token === rejected ? undefined : token;
    },
  };
}

/** The role session Lambda gives a function, from its environment. */
export function lambdaRoleCredentials(
  env: Record<string, string | undefined>,
): () => Promise<AwsCredentials> {
  return async () => {
    const accessKeyId = env.AWS_ACCESS_KEY_ID;
    const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
    if (!accessKeyId || !secretAccessKey)
      throw new Error(
        "EKS_CLUSTER_NAME is set but the function has no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
      );
    return {
      accessKeyId,
      secretAccessKey,
      ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
    };
  };
}

/** RFC 3986 percent-encoding, as SigV4's canonical query string uses it. */
function encodeRfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** SHA-256 (and HMAC-SHA-256 with a secret) over node:crypto, the shape the signer asks for. */
class NodeSha256 {
  private readonly hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash =
      secret === undefined
        ? createHash("sha256")
        : createHmac("sha256", typeof secret === "string" ? secret : toBuffer(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(typeof data === "string" ? data : toBuffer(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
}

function toBuffer(data: ArrayBuffer | ArrayBufferView): Buffer {
  return ArrayBuffer.isView(data)
    ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    : Buffer.from(data);
}
