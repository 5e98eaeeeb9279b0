import { describe, expect, it } from "vitest";
import { issuerRoutes } from "./issuer.ts";

const jwk = (kid: string) => ({ kty: "EC", crv: "P-256", x: `x-${kid}`, y: `y-${kid}`, d: `d-${kid}`, kid });

describe("issuerRoutes", () => {
  it("serves discovery and every key's public part under the issuer's path, with no credential", async () => {
    const app = issuerRoutes({
      issuer: "https://workers.example/kubefn",
      signingKey: JSON.stringify({ keys: [jwk("new"), jwk("old")] }),
    });
    const discovery = await app.fetch(
      new Request("https://workers.example/kubefn/.well-known/openid-configuration"),
    );
    expect(discovery.status).toBe(200);
    expect(await discovery.json()).toMatchObject({
      issuer: "https://workers.example/kubefn",
      jwks_uri: "https://workers.example/kubefn/openid/v1/jwks",
    });
    const jwks = await app.fetch(new Request("https://workers.example/kubefn/openid/v1/jwks"));
    expect(jwks.headers.get("content-type")).toBe("application/jwk-set+json");
    expect(await jwks.json()).toEqual({
      keys: [
        { kty: "EC", kid: "new", use: "sig", alg: "ES256", crv: "P-256", x: "x-new", y: "y-new" },
        { kty: "EC", kid: "old", use: "sig", alg: "ES256", crv: "P-256", x: "x-old", y: "y-old" },
      ],
    });
    expect((await app.fetch(new Request("https://workers.example/openid/v1/jwks"))).status).toBe(404);
  });
});
