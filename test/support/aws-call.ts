/**
 * One signed call to an AWS service whose SDK client the repository does not install
 * (CloudWatch, SNS), against moto's server: Signature V4 (`@smithy/signature-v4`, which the
 * installed clients use) over node:crypto's SHA-256, in the service's own protocol — CloudWatch's
 * JSON 1.0 (`X-Amz-Target: GraniteServiceVersion20100801.<Action>`), SNS's query (form-encoded,
 * an XML answer).
 */
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { REGION, TEST_CREDENTIALS } from "./moto.ts";

type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data) =>
  typeof d === "string"
    ? Buffer.from(d)
    : ArrayBuffer.isView(d)
      ? Buffer.from(d.buffer, d.byteOffset, d.byteLength)
      : Buffer.from(d);

class Sha256 {
  private readonly h: Hash | Hmac;
  constructor(secret?: Data) {
    this.h = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: Data): void {
    this.h.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest());
  }
  reset(): void {}
}

async function signedFetch(
  endpoint: string,
  service: string,
  headers: Record<string, string>,
  body: string,
): Promise<Response> {
  const url = new URL(endpoint);
  const signer = new SignatureV4({
    service,
    region: REGION,
    sha256: Sha256,
    credentials: {
      accessKeyId: TEST_CREDENTIALS.AWS_ACCESS_KEY_ID,
      secretAccessKey: TEST_CREDENTIALS.AWS_SECRET_ACCESS_KEY,
    },
  });
  const signed = await signer.sign({
    method: "POST",
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: "/",
    query: {},
    headers: { ...headers, host: url.host },
    body,
  });
  const { host: _host, ...sent } = signed.headers;
  return fetch(`${endpoint}/`, { method: "POST", headers: sent, body });
}

/** A CloudWatch action (JSON 1.0) and its answer; an error answer throws with its body. */
export async function cloudWatch<T = Record<string, unknown>>(
  endpoint: string,
  action: string,
  input: Record<string, unknown>,
): Promise<T> {
  const res = await signedFetch(
    endpoint,
    "monitoring",
    {
      "content-type": "application/x-amz-json-1.0",
      "x-amz-target": `GraniteServiceVersion20100801.${action}`,
    },
    JSON.stringify(input),
  );
  const text = await res.text();
  if (!res.ok) throw new Error(`CloudWatch ${action}: ${res.status} ${text}`);
  return (text ? JSON.parse(text) : {}) as T;
}

/** An SNS action (query protocol); its XML answer as text. An error answer throws with its body. */
export async function sns(endpoint: string, action: string, params: Record<string, string>): Promise<string> {
  const body = new URLSearchParams({ Action: action, Version: "2010-03-31", ...params }).toString();
  const res = await signedFetch(
    endpoint,
    "sns",
    { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
    body,
  );
  const text = await res.text();
  if (!res.ok) throw new Error(`SNS ${action}: ${res.status} ${text}`);
  return text;
}
