import { describe, expect, it } from "vitest";
import { AwsConfigError, parseAwsEnv } from "./config.ts";
import { eksTokenPrefix, eksTokenSource, mintEksToken } from "./eks-token.ts";

const credentials = async () => ({
  accessKeyId: "ASIAEXAMPLE",
  secretAccessKey: "secret",
  sessionToken: "s/+=",
});
const urlOf = (token: string) =>
  new URL(Buffer.from(token.slice(eksTokenPrefix.length), "base64url").toString());

describe("mintEksToken", () => {
  it("is what aws eks get-token prints: a presigned GetCallerIdentity for the regional STS host, the cluster header signed", async () => {
    const token = await mintEksToken({
      clusterName: "prod",
      region: "eu-west-1",
      credentials,
      now: () => Date.UTC(2026, 11, 2, 5, 0, 0),
    });
    expect(token.startsWith("k8s-aws-v1.")).toBe(true);
    expect(token).not.toMatch(/[=+/]/);
    const url = urlOf(token);
    expect(url.origin).toBe("https://sts.eu-west-1.amazonaws.com");
    expect(url.pathname).toBe("/");
    expect(Object.fromEntries(url.searchParams)).toEqual({
      Action: "GetCallerIdentity",
      Version: "2011-06-15",
      "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
      "X-Amz-Credential": "ASIAEXAMPLE/20261202/eu-west-1/sts/aws4_request",
      "X-Amz-Date": "20261202T050000Z",
      "X-Amz-Expires": "60",
      "X-Amz-Security-Token": "s/+=",
      "X-Amz-SignedHeaders": "host;x-k8s-aws-id",
      "X-Amz-Signature": expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it("signs the cluster name: tokens for two clusters differ only in their signature", async () => {
    const now = () => 1_800_000_000_000;
    const a = urlOf(await mintEksToken({ clusterName: "a", region: "us-east-1", credentials, now }));
    const b = urlOf(await mintEksToken({ clusterName: "b", region: "us-east-1", credentials, now }));
    expect(a.searchParams.get("X-Amz-Signature")).not.toBe(b.searchParams.get("X-Amz-Signature"));
    a.searchParams.delete("X-Amz-Signature");
    b.searchParams.delete("X-Amz-Signature");
    expect(a.href).toBe(b.href);
  });
});

describe("eksTokenSource", () => {
  const clock = () => {
    let t = 1_800_000_000_000;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  };

  it("uses one token until renewAfterMs, then mints the next", async () => {
    const c = clock();
    const source = eksTokenSource({
      clusterName: "x",
      region: "us-east-1",
      credentials,
      now: c.now,
      renewAfterMs: 600_000,
    });
    const first = await source.token();
    c.advance(599_999);
    expect(await source.token()).toBe(first);
    c.advance(1);
    const second = await source.token();
    expect(second).not.toBe(first);
    expect(urlOf(second).searchParams.get("X-Amz-Date")).toBe("20270115T081000Z");
  });

  it("replaces a refused token at once, and requests refused together share the one replacement", async () => {
    const c = clock();
    const source = eksTokenSource({ clusterName: "x", region: "us-east-1", credentials, now: c.now });
    const refused = await source.token();
    c.advance(1000);
    const [a, b] = await Promise.all([source.renew(refused), source.renew(refused)]);
    expect(a).toBeDefined();
    expect(a).not.toBe(refused);
    expect(b).toBe(a);
    expect(await source.token()).toBe(a);
  });

  it("mints once for requests arriving together", async () => {
    let asked = 0;
    const source = eksTokenSource({
      clusterName: "x",
      region: "us-east-1",
      credentials: () => {
        asked++;
        return credentials();
      },
    });
    const tokens = await Promise.all([source.token(), source.token(), source.token()]);
    expect(new Set(tokens).size).toBe(1);
    expect(asked).toBe(1);
  });
});

describe("parseAwsEnv on EKS", () => {
  const base = { AWS_REGION: "eu-west-1", QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/1/kubefn" };
  const eks = {
    EKS_CLUSTER_NAME: "prod",
    KUBE_SERVER: "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
    KUBE_CA_DATA: "LS0tLS1CRUdJTg==",
  };

  it("needs no kubeconfig: the cluster, its endpoint and CA", () => {
    expect(parseAwsEnv({ ...base, ...eks }).kubeconfig).toEqual({
      eks: { clusterName: "prod", server: eks.KUBE_SERVER, caData: eks.KUBE_CA_DATA, renewAfterMs: 600_000 },
    });
    expect(parseAwsEnv({ ...base, ...eks, EKS_TOKEN_RENEW_SECONDS: "30" }).kubeconfig).toMatchObject({
      eks: { renewAfterMs: 30_000 },
    });
  });

  it.each([
    [{ ...eks, KUBE_SERVER: undefined }, "KUBE_SERVER"],
    [{ ...eks, KUBE_CA_DATA: undefined }, "KUBE_CA_DATA"],
    [{ ...eks, KUBE_SERVER: "http://plain.example" }, "KUBE_SERVER"],
    [{ ...eks, EKS_TOKEN_RENEW_SECONDS: "900" }, "EKS_TOKEN_RENEW_SECONDS"],
  ])("refuses %o, naming %s", (vars, name) => {
    expect(() => parseAwsEnv({ ...base, ...vars })).toThrow(AwsConfigError);
    expect(() => parseAwsEnv({ ...base, ...vars })).toThrow(name);
  });
});
