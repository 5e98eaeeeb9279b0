import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createTokenSigner,
  type JwksServer,
  startJwksServer,
  type TokenSigner,
} from "../../test/fixtures/google-tokens.ts";
import {
  fetchedKeys,
  KeysUnavailableError,
  type PushTokenPolicy,
  staticKeys,
  verifyPushToken,
} from "./index.ts";

const AUD = "https://kubefn.example.com/v1/events/pubsub";
const SA = "kubefn-push@kubefn-demo.iam.gserviceaccount.com";
const now = () => Date.now() / 1000;

let signer: TokenSigner;
let other: TokenSigner;
let policy: PushTokenPolicy;

beforeAll(async () => {
  [signer, other] = await Promise.all([createTokenSigner("k1"), createTokenSigner("k1")]);
  policy = { audience: AUD, serviceAccountEmail: SA, keys: staticKeys(signer.jwks) };
});

const good = { aud: AUD, email: SA, sub: "113774264463038321964", azp: "113774264463038321964" };

describe("Pub/Sub push OIDC tokens", () => {
  it("accepts a Google-signed token for our audience and service account", async () => {
    expect(await verifyPushToken(await signer.sign(good), policy, now())).toEqual({ ok: true, email: SA });
  });

  it.each<[string, () => Promise<string | undefined>, 401 | 403, string]>([
    ["no token", async () => undefined, 401, "MissingToken"],
    ["two parts", async () => "a.b", 401, "MalformedToken"],
    ["garbage", async () => "%%.%%.%%", 401, "MalformedToken"],
    [
      "alg none",
      async () => (await signer.sign(good, { alg: "none" })).replace(/\.[^.]*$/, "."),
      401,
      "UnsupportedAlgorithm",
    ],
    ["HS256", async () => signer.sign(good, { alg: "HS256" }), 401, "UnsupportedAlgorithm"],
    ["an unknown kid", async () => signer.sign(good, { kid: "k9" }), 401, "UnknownKey"],
    ["signed by another key under our kid", async () => other.sign(good), 401, "BadSignature"],
    [
      "claims swapped after signing",
      async () => {
        const [h, , s] = (await signer.sign(good)).split(".");
        const p = Buffer.from(
          JSON.stringify({
            ...good,
            iss: "https://accounts.google.com",
            exp: now() + 60,
            email_verified: true,
          }),
        ).toString("base64url");
        return `${h}.${p}.${s}`;
      },
      401,
      "BadSignature",
    ],
    ["expired", async () => signer.sign({ ...good, exp: Math.floor(now()) - 600 }), 401, "Expired"],
    [
      "issued in the future",
      async () => signer.sign({ ...good, iat: Math.floor(now()) + 600 }),
      401,
      "Expired",
    ],
    [
      "another issuer",
      async () => signer.sign({ ...good, iss: "https://evil.example.com" }),
      401,
      "WrongIssuer",
    ],
    [
      "another audience",
      async () => signer.sign({ ...good, aud: "https://other.example.com" }),
      403,
      "WrongAudience",
    ],
    [
      "another service account",
      async () => signer.sign({ ...good, email: "x@evil.iam.gserviceaccount.com" }),
      403,
      "WrongServiceAccount",
    ],
    [
      "an unverified email",
      async () => signer.sign({ ...good, email_verified: false }),
      403,
      "EmailNotVerified",
    ],
  ])("refuses %s", async (_what, token, status, reason) => {
    expect(await verifyPushToken(await token(), policy, now())).toEqual({ ok: false, status, reason });
  });

  it("allows a minute of clock skew on exp", async () => {
    const token = await signer.sign({ ...good, exp: Math.floor(now()) - 30 });
    expect((await verifyPushToken(token, policy, now())).ok).toBe(true);
  });
});

describe("keys fetched from a JWKS URL (loopback)", () => {
  let server: JwksServer;
  beforeAll(async () => {
    server = await startJwksServer(signer.jwks);
  });
  afterAll(() => server.close());

  it("fetches once and caches; a rotated key is fetched on its first use, unknown kids at most once per refresh interval", async () => {
    let t = 1_000;
    const keys = fetchedKeys({ url: server.url, now: () => t, minRefreshSeconds: 30 });
    const p = { ...policy, keys };
    const before = server.hits();
    for (let i = 0; i < 3; i++)
      expect((await verifyPushToken(await signer.sign(good), p, now())).ok).toBe(true);
    expect(server.hits() - before).toBe(1);

    const rotated = await createTokenSigner("k2");
    server.serve({ keys: [...signer.jwks.keys, ...rotated.jwks.keys] });
    // Within the refresh interval an unknown kid does not fetch again.
    expect(await verifyPushToken(await rotated.sign(good), p, now())).toMatchObject({ reason: "UnknownKey" });
    expect(server.hits() - before).toBe(1);
    t += 31;
    expect((await verifyPushToken(await rotated.sign(good), p, now())).ok).toBe(true);
    expect(server.hits() - before).toBe(2);
    for (let i = 0; i < 5; i++)
      await verifyPushToken(await signer.sign(good, { kid: `forged-${i}` }), p, now());
    expect(server.hits() - before).toBe(2);
  });

  it("a JWKS fetch that never settles (its Worker invocation was cut off) is given up after its timeout, and fetched again", async () => {
    let t = 1_000;
    let calls = 0;
    const signals: (AbortSignal | null | undefined)[] = [];
    const hanging = (async (url: string, init?: RequestInit) => {
      calls++;
      signals.push(init?.signal);
      if (calls === 1) return new Promise(() => undefined);
      return fetch(url, init);
    }) as unknown as typeof fetch;
    const keys = fetchedKeys({ url: server.url, fetch: hanging, now: () => t });
    void keys.key("k1");
    await vi.waitFor(() => expect(calls).toBe(1));
    t += 14;
    void keys.key("k1");
    expect(calls).toBe(1);
    t += 1;
    expect(await keys.key("k1")).toBeDefined();
    expect(calls).toBe(2);
    // Each fetch carries its own deadline (where the platform keeps the invocation, it fires).
    expect(signals.every((s) => s instanceof AbortSignal)).toBe(true);
  });

  it("an unreachable JWKS is KeysUnavailableError (a retry may help)", async () => {
    server.serve("fail");
    const keys = fetchedKeys({ url: server.url, now: () => 0 });
    await expect(verifyPushToken(await signer.sign(good), { ...policy, keys }, now())).rejects.toBeInstanceOf(
      KeysUnavailableError,
    );
    server.serve(signer.jwks);
  });
});
