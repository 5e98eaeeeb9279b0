/**
 * Issue 19, item 6: kubefn as its own OIDC issuer. A devcluster of this file's own trusts kubefn
 * through structured authentication configuration (a JWT authenticator: issuer
 * https://127.0.0.1:<port>, the API server fetching discovery and the JWKS over TLS with a
 * self-signed CA); the Node host serves that issuer over HTTPS, and its kubeconfig holds no
 * credential at all: every request carries a JWT it signed (ES256, the first key of its JWK set;
 * both keys published). The `sub` claim maps to `kubefn-oidc:kubefn`, which `SELF_USERNAMES` lists
 * beside the ServiceAccount, so the admission policies contain it (item 7).
 *
 * The JWTs live one minute (item 8): a Proxy created after the host's first token expired
 * converges only because the host renews; with `renewTokens: false` ({@link RENEW}) that test
 * fails (its passes are refused with 401).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import { DEFAULT_IDENTITY } from "../../shared/app/admission/index.ts";
import { importSigningKeys, issuedTokenSource, type SigningJwk } from "../../shared/auth/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, findCondition, type Kube, type KubeObject } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually } from "../setup/cluster.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import {
  documentedClaimRules,
  freePort,
  getJson,
  installForIssuer,
  issueCertificates,
  privateJwk,
  whoIs,
  writeAuthenticationConfig,
} from "../support/oidc-issuer.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import { tempDir } from "../support/temp-dir.ts";

/** Whether the host renews its tokens; false shows the renewal test fail. */
const RENEW = true;
const TOKEN_SECONDS = 60;
const username = "kubefn-oidc:kubefn";
const namespace = "oidc-tenant";

const dir = tempDir("kubefn-oidc-");
let devcluster: OwnDevcluster | undefined;
let admin: Kube;
let host: NodeHost | undefined;
let issuer: string;
let caPem: string;
let signingKey: string;
let hostStarted = 0;
const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];

const external = (name: string): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" } },
});

async function provisioned(name: string, timeoutMs: number): Promise<void> {
  await eventually(
    async () => {
      const p = await admin.get<KubeObject & { status?: { conditions?: never } }>(proxyResource, {
        namespace,
        name,
      });
      return findCondition(p.status?.conditions, "Provisioned")?.status === "True" ? true : undefined;
    },
    { timeoutMs, intervalMs: 500, what: `Proxy ${name} Provisioned` },
  );
}

let adminKubeconfig: string;

beforeAll(async () => {
  const tls = issueCertificates(dir.path);
  caPem = readFileSync(tls.ca, "utf8");
  const port = await freePort();
  issuer = `https://127.0.0.1:${port}`;
  // Two keys: the first signs, both are published (the state halfway through a rotation).
  signingKey = JSON.stringify({ keys: [await privateJwk("kubefn-1"), await privateJwk("kubefn-0")] });

  devcluster = await startOwnDevcluster([
    `--authentication-config=${writeAuthenticationConfig(dir.path, issuer, caPem)}`,
  ]);
  adminKubeconfig = devcluster.kubeconfig;
  admin = createKube(createNodeTransport(loadKubeConfig({ file: adminKubeconfig })));

  // kubefn's identities are the ServiceAccount and its OIDC username; its roles bound to both.
  await installForIssuer(admin, username, namespace);

  // The host's kubeconfig: the cluster and its CA, a user with no credential.
  const kc = parseYaml(readFileSync(adminKubeconfig, "utf8")) as {
    clusters: unknown[];
    contexts: Array<{ name: string; context: { cluster: string } }>;
  };
  const hostKubeconfig = join(dir.path, "host.kubeconfig");
  writeFileSync(
    hostKubeconfig,
    toYaml({
      apiVersion: "v1",
      kind: "Config",
      clusters: kc.clusters,
      users: [{ name: "nobody", user: {} }],
      contexts: [{ name: "kubefn", context: { cluster: kc.contexts[0]?.context.cluster, user: "nobody" } }],
      "current-context": "kubefn",
    }),
  );
  const config = parseNodeHostEnv({
    KUBECONFIG: hostKubeconfig,
    KUBEFN_HOST: "127.0.0.1",
    KUBEFN_PORT: String(port),
    KUBEFN_TLS_CERT_FILE: tls.cert,
    KUBEFN_TLS_KEY_FILE: tls.key,
    OIDC_ISSUER: issuer,
    OIDC_SIGNING_KEY: signingKey,
    OIDC_TOKEN_SECONDS: String(TOKEN_SECONDS),
    SELF_USERNAMES: `${DEFAULT_IDENTITY},${username}`,
    KUBEFN_SWEEP_SECONDS: "2",
    // The API server fetches the keys a moment after the host first asks: check again soon.
    ADMISSION_RECHECK_SECONDS: "2",
    PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
  });
  const record = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  hostStarted = Date.now();
  host = await startNodeHost(
    { ...config, renewTokens: RENEW },
    { info: record("info"), warn: record("warn"), error: record("error") },
  );
}, 240_000);

afterAll(async () => {
  await host?.stop();
  await devcluster?.close();
  dir.remove();
}, 120_000);

describe("kubefn as its own OIDC issuer", () => {
  it("serves its discovery document and both keys over HTTPS, and the API server takes its JWT for its username", async () => {
    expect(host?.url).toBe(issuer);
    const discovery = (await getJson(`${issuer}/.well-known/openid-configuration`, caPem)) as Record<
      string,
      unknown
    >;
    expect(discovery).toMatchObject({ issuer, jwks_uri: `${issuer}/openid/v1/jwks` });
    const jwks = (await getJson(`${issuer}/openid/v1/jwks`, caPem)) as {
      keys: Array<Record<string, unknown>>;
    };
    expect(jwks.keys.map((k) => k.kid)).toEqual(["kubefn-1", "kubefn-0"]);
    expect(jwks.keys.every((k) => !("d" in k))).toBe(true);

    const mint = (kid: string, audience = "kubefn") =>
      importSigningKeys(
        JSON.stringify({
          keys: (JSON.parse(signingKey) as { keys: SigningJwk[] }).keys.sort((a) => (a.kid === kid ? -1 : 1)),
        }),
      ).then((keys) =>
        issuedTokenSource({
          issuer,
          audience,
          subject: "kubefn",
          validitySeconds: TOKEN_SECONDS,
          keys,
          now: () => Date.now() / 1000,
        }).token(),
      );
    // The API server fetches the keys on its own schedule once the issuer answers.
    const who = await eventually(
      async () => {
        const r = await whoIs(adminKubeconfig, await mint("kubefn-1"));
        return r === 401 ? undefined : r;
      },
      { timeoutMs: 60_000, intervalMs: 1000, what: "the API server to take kubefn's JWT" },
    );
    expect(who).toBe(username);
    // The second key of the set (a key being rotated in or out) is trusted too.
    expect(await whoIs(adminKubeconfig, await mint("kubefn-0"))).toBe(username);
    // Another audience, or a key that is not published, is refused.
    expect(await whoIs(adminKubeconfig, await mint("kubefn-1", "someone-else"))).toBe(401);
    const stranger = await importSigningKeys(JSON.stringify(await privateJwk("kubefn-1")));
    const forged = await issuedTokenSource({
      issuer,
      audience: "kubefn",
      subject: "kubefn",
      validitySeconds: TOKEN_SECONDS,
      keys: stranger,
      now: () => Date.now() / 1000,
    }).token();
    expect(await whoIs(adminKubeconfig, forged)).toBe(401);

    // Whoever steals the signing key (issue 30, Low): under the documented claim rules a token for
    // another subject under kubefn's prefix, or one living a day, is refused.
    expect(documentedClaimRules().map((r) => r.expression)).toEqual([
      "claims.sub == 'kubefn'",
      "claims.exp - claims.nbf <= 900",
    ]);
    const stolen = await importSigningKeys(signingKey);
    const minted = (subject: string, validitySeconds: number) =>
      issuedTokenSource({
        issuer,
        audience: "kubefn",
        subject,
        validitySeconds,
        keys: stolen,
        now: () => Date.now() / 1000,
      }).token();
    expect(await whoIs(adminKubeconfig, await minted("kubefn", TOKEN_SECONDS))).toBe(username);
    expect(await whoIs(adminKubeconfig, await minted("cluster-admin", TOKEN_SECONDS))).toBe(401);
    expect(await whoIs(adminKubeconfig, await minted("kubefn", 86_400))).toBe(401);
  }, 90_000);

  it("converges a Proxy, authenticating only by its own JWTs", async () => {
    await admin.create(proxyResource, external("first"));
    // No intake here: a full sweep visits it (the drift would, but only within a drift period).
    await host?.sweep(true);
    await provisioned("first", 60_000);
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
  }, 90_000);

  it("still converges one after its first token expired: it renews", async () => {
    const expired = hostStarted + (TOKEN_SECONDS + 10) * 1000;
    await new Promise((r) => setTimeout(r, Math.max(0, expired - Date.now())));
    await admin.create(proxyResource, external("second"));
    // No intake here (no audit webhook, no relay): a full sweep, as the host runs at start, visits it.
    await host?.sweep(true);
    await provisioned("second", 30_000);
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
  }, 150_000);
});
