import { describe, expect, it } from "vitest";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { importSigningKeys, issuedTokenSource, issuerDocuments, type SigningJwk, signJwt } from "./index.ts";

async function privateJwk(kty: "EC" | "RSA", kid: string): Promise<SigningJwk> {
  const pair = (await crypto.subtle.generateKey(
    kty === "EC"
      ? { name: "ECDSA", namedCurve: "P-256" }
      : {
          name: "RSASSA-PKCS1-v1_5",
          modulusLength: 2048,
          publicExponent: new Uint8Array([1, 0, 1]),
          hash: "SHA-256",
        },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  return { ...(await crypto.subtle.exportKey("jwk", pair.privateKey)), kid } as SigningJwk;
}

const decode = (part: string) => JSON.parse(Buffer.from(part, "base64url").toString("utf8"));

/** Verifies `jwt` against the published JWKS, as the API server does: by its header's kid. */
async function verify(jwt: string, jwks: { keys: ReadonlyArray<{ kid: string }> }) {
  const [h, p, s] = jwt.split(".") as [string, string, string];
  const header = decode(h);
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  if (!jwk) return false;
  const es = header.alg === "ES256";
  const key = await crypto.subtle.importKey(
    "jwk",
    jwk as JsonWebKey,
    es ? { name: "ECDSA", namedCurve: "P-256" } : { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    false,
    ["verify"],
  );
  return crypto.subtle.verify(
    es ? { name: "ECDSA", hash: "SHA-256" } : { name: "RSASSA-PKCS1-v1_5" },
    key,
    Buffer.from(s, "base64url"),
    new TextEncoder().encode(`${h}.${p}`),
  );
}

const claims = { iss: "https://kubefn.example", sub: "kubefn", aud: "kubefn", iat: 1, nbf: 1, exp: 2 };

describe("kubefn's OIDC issuer", () => {
  it.each(["EC", "RSA"] as const)(
    "signs a JWT (%s) that its published JWKS verifies, and publishes no private part",
    async (kty) => {
      const jwk = await privateJwk(kty, "k1");
      const { jwks } = issuerDocuments("https://kubefn.example", JSON.stringify(jwk));
      const jwt = await signJwt(await importSigningKeys(JSON.stringify(jwk)), claims);
      expect(decode(jwt.split(".")[0]!)).toEqual({
        alg: kty === "EC" ? "ES256" : "RS256",
        kid: "k1",
        typ: "JWT",
      });
      expect(decode(jwt.split(".")[1]!)).toEqual(claims);
      expect(await verify(jwt, jwks)).toBe(true);
      expect(JSON.stringify(jwks)).not.toMatch(/"(d|p|q|dp|dq|qi)"/);
      // A changed payload does not verify.
      const [h, , s] = jwt.split(".");
      const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: "admin" })).toString("base64url")}.${s}`;
      expect(await verify(forged, jwks)).toBe(false);
    },
  );

  it("rotates with two keys: the first signs, both are published, the old one's tokens still verify", async () => {
    const [old, next] = [await privateJwk("EC", "old"), await privateJwk("EC", "new")];
    const before = JSON.stringify({ keys: [old, next] });
    const after = JSON.stringify({ keys: [next, old] });
    const oldToken = await signJwt(await importSigningKeys(before), claims);
    const newToken = await signJwt(await importSigningKeys(after), claims);
    expect(decode(newToken.split(".")[0]!).kid).toBe("new");
    const { jwks } = issuerDocuments("https://kubefn.example", after);
    expect(jwks.keys.map((k) => k.kid)).toEqual(["new", "old"]);
    expect(await verify(oldToken, jwks)).toBe(true);
    expect(await verify(newToken, jwks)).toBe(true);
    // Once the old key is dropped, its tokens are refused.
    expect(await verify(oldToken, issuerDocuments("https://kubefn.example", JSON.stringify(next)).jwks)).toBe(
      false,
    );
  });

  it("serves discovery under the issuer's path, naming the JWKS there", () => {
    const jwk = JSON.stringify({ kty: "EC", crv: "P-256", x: "x", y: "y", d: "d", kid: "k" });
    const { prefix, discovery } = issuerDocuments("https://workers.example/kubefn", jwk);
    expect(prefix).toBe("/kubefn");
    expect(discovery).toMatchObject({
      issuer: "https://workers.example/kubefn",
      jwks_uri: "https://workers.example/kubefn/openid/v1/jwks",
      id_token_signing_alg_values_supported: ["ES256"],
    });
  });

  it("mints a token, keeps it while more than a fifth of its validity is left, then mints the next", async () => {
    const clock = { t: 1_000_000 };
    const options = {
      issuer: "https://kubefn.example",
      audience: "kubefn",
      subject: "kubefn",
      validitySeconds: 60,
      keys: await importSigningKeys(JSON.stringify(await privateJwk("EC", "k"))),
      now: () => clock.t,
    };
    const source = issuedTokenSource(options);
    const first = await source.token();
    expect(decode(first.split(".")[1]!)).toEqual({
      iss: "https://kubefn.example",
      sub: "kubefn",
      aud: "kubefn",
      iat: clock.t - 30,
      nbf: clock.t - 30,
      exp: clock.t + 60,
    });
    clock.t += 47;
    expect(await source.token()).toBe(first);
    clock.t += 2;
    const second = await source.token();
    expect(second).not.toBe(first);
    // A 401 on the current token mints another; on an older one, the current is sent.
    clock.t += 1;
    const third = await source.renew(second);
    expect(third).toBeDefined();
    expect(third).not.toBe(second);
    expect(await source.renew(first)).toBe(third);
    // Without renewal the first token stays, expired or refused.
    const stale = issuedTokenSource(options, false);
    const only = await stale.token();
    clock.t += 3600;
    expect(await stale.token()).toBe(only);
    expect(await stale.renew(only)).toBeUndefined();
  });

  it("is configured by an https issuer and a private key only", async () => {
    const base = { KUBE_SERVER: "https://k8s.example", KUBE_TOKEN: "t".repeat(20) };
    const key = JSON.stringify(await privateJwk("EC", "k"));
    expect(() =>
      parseWorkerEnv({ ...base, OIDC_ISSUER: "http://kubefn.example", OIDC_SIGNING_KEY: key }),
    ).toThrow(/OIDC_ISSUER must be an https URL/);
    const { kty, crv, x, y, kid } = JSON.parse(key);
    expect(() =>
      parseWorkerEnv({
        ...base,
        OIDC_ISSUER: "https://kubefn.example",
        OIDC_SIGNING_KEY: JSON.stringify({ kty, crv, x, y, kid }),
      }),
    ).toThrow(/OIDC_SIGNING_KEY must be a private JWK/);
    // No KUBE_TOKEN needed: the signing key is the Worker's one secret.
    const config = parseWorkerEnv({
      KUBE_SERVER: base.KUBE_SERVER,
      OIDC_ISSUER: "https://kubefn.example",
      OIDC_SIGNING_KEY: key,
    });
    expect(config.kubeAuth).toEqual({ oidc: config.oidcIssuer });
    expect(config.oidcIssuer).toEqual({
      issuer: "https://kubefn.example",
      signingKey: key,
      audience: "kubefn",
      subject: "kubefn",
      tokenSeconds: 600,
    });
  });
});
