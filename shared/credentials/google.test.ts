import { describe, expect, it, vi } from "vitest";
import { ReconcileError } from "../kube/index.ts";
import {
  bytesFromBase64Url,
  bytesFromPem,
  computeScope,
  createServiceAccountTokenSource,
  kubeTokenSourceFrom,
  pemFromBytes,
  type ServiceAccountKey,
} from "./google.ts";

async function generateServiceAccount(): Promise<{ key: ServiceAccountKey; publicKey: CryptoKey }> {
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
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  return {
    key: {
      client_email: "kubefn@crawl-test.iam.gserviceaccount.com",
      private_key: pemFromBytes(pkcs8, "PRIVATE KEY"),
      private_key_id: "k1",
      token_uri: "https://oauth2.example.test/token",
    },
    publicKey: pair.publicKey,
  };
}

async function verifyJwt(jwt: string, publicKey: CryptoKey) {
  const [header, claims, signature] = jwt.split(".");
  const valid = await crypto.subtle.verify(
    "RSASSA-PKCS1-v1_5",
    publicKey,
    bytesFromBase64Url(signature!),
    new TextEncoder().encode(`${header}.${claims}`),
  );
  const decode = (part: string) => JSON.parse(new TextDecoder().decode(bytesFromBase64Url(part)));
  return { valid, header: decode(header!), claims: decode(claims!) };
}

const fixedClock = (iso: string) => ({ now: () => new Date(iso) });

describe("service-account JWT bearer grant", () => {
  it("signs an RS256 assertion that verifies against the public key, with Google's claims", async () => {
    const { key, publicKey } = await generateServiceAccount();
    const seen: { url: string; form: URLSearchParams }[] = [];
    const fakeFetch = (async (url: string, init?: RequestInit) => {
      seen.push({ url, form: new URLSearchParams(String(init?.body)) });
      return Response.json({ access_token: "tok-1", expires_in: 3599, token_type: "Bearer" });
    }) as typeof fetch;
    const source = createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    });

    expect(await source.token()).toBe("tok-1");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe(key.token_uri);
    expect(seen[0]!.form.get("grant_type")).toBe("urn:ietf:params:oauth:grant-type:jwt-bearer");

    const jwt = await verifyJwt(seen[0]!.form.get("assertion")!, publicKey);
    expect(jwt.valid).toBe(true);
    expect(jwt.header).toEqual({ alg: "RS256", typ: "JWT", kid: "k1" });
    const iat = Date.parse("2026-11-30T05:00:00Z") / 1000;
    expect(jwt.claims).toEqual({
      iss: key.client_email,
      scope: computeScope,
      aud: key.token_uri,
      iat,
      exp: iat + 3600,
    });
  });

  it("a tampered assertion does not verify", async () => {
    const { key, publicKey } = await generateServiceAccount();
    let assertion = "";
    const fakeFetch = (async (_url: string, init?: RequestInit) => {
      assertion = new URLSearchParams(String(init?.body)).get("assertion")!;
      return Response.json({ access_token: "t", expires_in: 3600 });
    }) as typeof fetch;
    await createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    }).token();
    const [h, , s] = assertion.split(".");
    const forged = `${h}.${btoa(JSON.stringify({ iss: "evil" })).replace(/=+$/, "")}.${s}`;
    expect((await verifyJwt(forged, publicKey)).valid).toBe(false);
  });

  it("calls fetch unbound: workerd's fetch throws Illegal invocation when called as a method of the options", async () => {
    const { key } = await generateServiceAccount();
    // Like workerd's global fetch: refuses any `this` but none (or the global object).
    const strictFetch = function (this: unknown) {
      if (this !== undefined && this !== globalThis) throw new TypeError("Illegal invocation");
      return Promise.resolve(Response.json({ access_token: "tok", expires_in: 3600 }));
    } as unknown as typeof fetch;
    const source = createServiceAccountTokenSource({
      key,
      fetch: strictFetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    });
    expect(await source.token()).toBe("tok");
  });

  it.each([
    ["an hour's token a minute before it expires", 3600, 3539, 3540],
    ["a 20 s token at half its life", 20, 9, 10],
  ])("replaces %s", async (_name, expiresIn, keptAt, replacedAt) => {
    const { key } = await generateServiceAccount();
    let calls = 0;
    const fakeFetch = (async () => {
      calls++;
      return Response.json({ access_token: `t${calls}`, expires_in: expiresIn });
    }) as unknown as typeof fetch;
    let now = Date.parse("2026-11-30T05:00:00Z");
    const source = createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: { now: () => new Date(now) },
    });
    const start = now;
    expect(await source.token()).toBe("t1");
    now = start + keptAt * 1000;
    expect(await source.token()).toBe("t1");
    now = start + replacedAt * 1000;
    expect(await source.token()).toBe("t2");
  });

  it("as a Kubernetes token source, exchanges again after a 401 (and has nothing newer when Google answers the same)", async () => {
    const { key } = await generateServiceAccount();
    const answers = ["t1", "t2", "t2"];
    const fakeFetch = (async () =>
      Response.json({ access_token: answers.shift(), expires_in: 3600 })) as unknown as typeof fetch;
    const source = kubeTokenSourceFrom(
      createServiceAccountTokenSource({ key, fetch: fakeFetch, clock: fixedClock("2026-11-30T05:00:00Z") }),
    );
    expect(await source.token()).toBe("t1");
    expect(await source.renew("t1")).toBe("t2");
    expect(await source.token()).toBe("t2");
    expect(await source.renew("t2")).toBeUndefined();
  });

  it("shares one in-flight exchange between concurrent callers", async () => {
    const { key } = await generateServiceAccount();
    let calls = 0;
    const fakeFetch = (async () => {
      calls++;
      return Response.json({ access_token: `t${calls}`, expires_in: 3600 });
    }) as unknown as typeof fetch;
    const source = createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    });
    expect(await Promise.all([source.token(), source.token(), source.token()])).toEqual(["t1", "t1", "t1"]);
    expect(calls).toBe(1);
  });

  it("gives up an exchange that never settles (its Worker invocation was cut off) after the request's timeout, and exchanges again", async () => {
    const { key } = await generateServiceAccount();
    let calls = 0;
    // The first exchange's fetch never settles, whatever its signal: on Workers, a request whose
    // invocation the platform cut off takes its fetch and the timer that would abort it with it.
    const fakeFetch = (async () => {
      calls++;
      if (calls === 1) return new Promise(() => undefined);
      return Response.json({ access_token: `t${calls}`, expires_in: 3600 });
    }) as unknown as typeof fetch;
    let now = Date.parse("2026-11-30T05:00:00Z");
    const source = createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: { now: () => new Date(now) },
    });
    void source.token();
    await vi.waitFor(() => expect(calls).toBe(1));
    now += 34_999;
    void source.token();
    expect(calls).toBe(1);
    now += 1;
    expect(await source.token()).toBe("t2");
    expect(calls).toBe(2);
  });

  it.each([
    [
      400,
      { error: "invalid_grant", error_description: "Invalid JWT Signature." },
      "permanent",
      "AuthenticationFailed",
    ],
    [503, {}, "transient", "TokenUnavailable"],
  ])("token endpoint %i → %s", async (status, body, errorClass, reason) => {
    const { key } = await generateServiceAccount();
    const fakeFetch = (async () => Response.json(body, { status })) as unknown as typeof fetch;
    const source = createServiceAccountTokenSource({
      key,
      fetch: fakeFetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    });
    await expect(source.token()).rejects.toMatchObject({ errorClass, reason });
  });

  it("a key that is not PKCS#8 is a permanent InvalidCredentials", async () => {
    const key = { client_email: "x@y", private_key: pemFromBytes(new Uint8Array([1, 2, 3]), "PRIVATE KEY") };
    const source = createServiceAccountTokenSource({
      key,
      fetch: (() => Promise.reject(new Error("unreachable"))) as typeof fetch,
      clock: fixedClock("2026-11-30T05:00:00Z"),
    });
    const err = await source.token().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReconcileError);
    expect(err).toMatchObject({ errorClass: "permanent", reason: "InvalidCredentials" });
  });

  it("PEM round-trips", () => {
    const der = crypto.getRandomValues(new Uint8Array(200));
    expect(bytesFromPem(pemFromBytes(der, "PRIVATE KEY"), "PRIVATE KEY")).toEqual(der);
  });
});
