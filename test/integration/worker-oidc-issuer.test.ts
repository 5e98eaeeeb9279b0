/**
 * Issue 19, item 6, on the platform it exists for: a Worker has no cloud identity, so kubefn as its
 * own OIDC issuer is its way to hold no long-lived API token. The Worker runs in workerd (wrangler's
 * test harness) with `OIDC_SIGNING_KEY` as its only credential (a secret; no `KUBE_TOKEN`), against
 * a devcluster of this file's own whose authentication configuration trusts the issuer
 * https://127.0.0.1:<port> and maps `sub` to `kubefn-oidc:kubefn`.
 *
 * The API server fetches discovery and the JWKS over TLS only, and the harness serves the Worker
 * over plain HTTP (it has no local HTTPS): a TLS front of this file (the test CA's certificate for
 * 127.0.0.1) passes the issuer URL's requests on to the Worker, so the documents the API server
 * trusts are the Worker's own (`issuerRoutes`), and the front stands in for the Worker's public
 * HTTPS URL. The Worker mints and renews its JWTs; the cron sweep sends them (recorded on the wire
 * by a pass-through in front of the API server).
 *
 * Renewal: the tokens live 60 s (`OIDC_TOKEN_SECONDS`, the least allowed) and an isolate keeps its
 * token between invocations. After the first token expired the sweep still converges a new Proxy
 * with no 401 on the wire, and the API server refuses the first token then: a Worker that did not
 * renew (`issuerTokenSource(…, false)`) would send exactly that token and be refused.
 */
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { DEFAULT_IDENTITY } from "../../shared/app/admission/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, findCondition, type Kube, type KubeObject } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { eventually } from "../setup/cluster.ts";
import { startRecordingApiProxy } from "../support/api-recorder.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import {
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

const TOKEN_SECONDS = 60;
const username = "kubefn-oidc:kubefn";
const namespace = "worker-oidc-tenant";

const dir = tempDir("kubefn-worker-oidc-");
let cluster: OwnDevcluster | undefined;
let admin: Kube;
let wire: Awaited<ReturnType<typeof startRecordingApiProxy>> | undefined;
let harness: TestHarness | undefined;
let front: Server | undefined;
let issuer: string;
let caPem: string;

interface Claims {
  iss: string;
  sub: string;
  aud: string | string[];
  iat: number;
  exp: number;
}

/** The JWT of an `Authorization: Bearer` header, and its claims (unverified: the API server verifies). */
function bearer(authorization: string | undefined): { token: string; claims: Claims } | undefined {
  const token = authorization?.match(/^Bearer (.+)$/)?.[1];
  const payload = token?.split(".")[1];
  if (!token || !payload) return undefined;
  return { token, claims: JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Claims };
}

/** One cron run of the Worker; its outcome. */
async function tick(): Promise<string | undefined> {
  const result = await harness?.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
  return result?.outcome;
}

const external = (name: string): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "External", endpoint: { host: "127.0.0.1", port: 3128, scheme: "http" } },
});

async function isProvisioned(name: string): Promise<boolean> {
  const p = await admin.get<KubeObject & { status?: { conditions?: never } }>(proxyResource, {
    namespace,
    name,
  });
  return findCondition(p.status?.conditions, "Provisioned")?.status === "True";
}

/** Cron runs until the Worker's sweep has provisioned `name` (a run refused with 401 throws: retried). */
async function sweepUntilProvisioned(name: string, timeoutMs: number): Promise<void> {
  await eventually(
    async () => {
      await tick();
      return (await isProvisioned(name)) ? true : undefined;
    },
    { timeoutMs, intervalMs: 1000, what: `the Worker's sweep to provision Proxy ${name}` },
  );
}

beforeAll(async () => {
  const tls = issueCertificates(dir.path);
  caPem = readFileSync(tls.ca, "utf8");
  const port = await freePort();
  issuer = `https://127.0.0.1:${port}`;
  const signingKey = JSON.stringify({ keys: [await privateJwk("kubefn-1")] });

  // The Worker and its front start before the devcluster, so the API server finds the issuer at
  // its first try. Workers trust only public CAs: the Worker reaches the API server through the
  // devcluster's plain-HTTP pass-through (Authorization passed on), with a recorder in front.
  wire = await startRecordingApiProxy(() => cluster?.httpProxy ?? "http://127.0.0.1:1");
  harness = createTestHarness({
    root: new URL("../../", import.meta.url).pathname,
    workers: [
      {
        configPath: "wrangler.toml",
        // Drift lists at every cron run (resync 60), so one run finds a new Proxy.
        vars: {
          KUBE_SERVER: wire.url,
          OIDC_ISSUER: issuer,
          OIDC_TOKEN_SECONDS: String(TOKEN_SECONDS),
          SELF_USERNAMES: `${DEFAULT_IDENTITY},${username}`,
          PROXY_RESYNC_SECONDS: "60",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
        },
        secrets: { OIDC_SIGNING_KEY: signingKey },
      },
    ],
  });
  await harness.listen();

  // The Worker's public HTTPS URL, stood in for: TLS here, everything else the Worker's answer.
  front = createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, (req, res) => {
    void (async () => {
      try {
        const answer = await (harness as TestHarness).fetch(req.url ?? "/");
        res.writeHead(answer.status, {
          "content-type": answer.headers.get("content-type") ?? "application/octet-stream",
        });
        res.end(Buffer.from(await answer.arrayBuffer()));
      } catch {
        res.writeHead(502).end();
      }
    })();
  });
  await new Promise<void>((resolve) => front?.listen(port, "127.0.0.1", resolve));

  cluster = await startOwnDevcluster([
    `--authentication-config=${writeAuthenticationConfig(dir.path, issuer, caPem)}`,
  ]);
  admin = createKube(createNodeTransport(loadKubeConfig({ file: cluster.kubeconfig })));
  await installForIssuer(admin, username, namespace);
}, 240_000);

afterAll(async () => {
  await new Promise((r) => (front ? front.close(r) : r(undefined)));
  await harness?.close();
  await new Promise((r) => (wire ? wire.server.close(r) : r(undefined)));
  await cluster?.close();
  dir.remove();
}, 120_000);

describe("a Worker as its own OIDC issuer", () => {
  it("serves its discovery document and public key at the issuer URL (through the TLS front)", async () => {
    const discovery = await getJson(`${issuer}/.well-known/openid-configuration`, caPem);
    expect(discovery).toMatchObject({ issuer, jwks_uri: `${issuer}/openid/v1/jwks` });
    const jwks = (await getJson(`${issuer}/openid/v1/jwks`, caPem)) as {
      keys: Array<Record<string, unknown>>;
    };
    expect(jwks.keys.map((k) => k.kid)).toEqual(["kubefn-1"]);
    expect(jwks.keys.every((k) => !("d" in k))).toBe(true);
  });

  it("its cron sweep converges a Proxy, every request carrying a JWT it signed, taken for its username", async () => {
    await admin.create(proxyResource, external("first"));
    // The API server fetches the JWKS on its own schedule once the issuer answers: until then
    // the Worker's requests are refused (401) and the sweep converges nothing.
    await sweepUntilProvisioned("first", 90_000);
    const calls = wire?.calls ?? [];
    expect(calls.length).toBeGreaterThan(0);
    const tokens = calls.map((c) => bearer(c.authorization));
    // No KUBE_TOKEN: every request the Worker sent carries a JWT of its issuer for kubefn.
    for (const t of tokens) {
      expect(t?.claims).toMatchObject({ iss: issuer, sub: "kubefn", aud: "kubefn" });
      // `iat` is set 30 s in the past (an API server whose clock is behind).
      expect((t?.claims.exp ?? 0) - (t?.claims.iat ?? 0)).toBe(TOKEN_SECONDS + 30);
    }
    const last = tokens.at(-1)?.token ?? "";
    expect(await whoIs(cluster?.kubeconfig ?? "", last)).toBe(username);

    // The isolate keeps its token between cron runs (so the next test's token is a renewal).
    const from = calls.length;
    expect(await tick()).toBe("ok");
    const next = (wire?.calls ?? []).slice(from).map((c) => bearer(c.authorization)?.token);
    expect(next.length).toBeGreaterThan(0);
    expect(new Set(next)).toEqual(new Set([last]));
  }, 150_000);

  it("still converges one after its first token expired: it renews, and the expired token is refused", async () => {
    const calls = wire?.calls ?? [];
    const seen = calls.flatMap((c) => bearer(c.authorization) ?? []);
    // The token the isolate holds: the latest sent. Wait past its expiry (and the API server's leeway).
    const held = seen.reduce((a, b) => (b.claims.exp > a.claims.exp ? b : a));
    await new Promise((r) => setTimeout(r, Math.max(0, held.claims.exp * 1000 + 10_000 - Date.now())));
    // What a Worker that did not renew would send: refused.
    expect(await whoIs(cluster?.kubeconfig ?? "", held.token)).toBe(401);

    const from = calls.length;
    await admin.create(proxyResource, external("second"));
    await sweepUntilProvisioned("second", 30_000);
    const after = calls.slice(from);
    expect(after.filter((c) => c.code === 401)).toEqual([]);
    const renewed = after.map((c) => bearer(c.authorization));
    expect(renewed.length).toBeGreaterThan(0);
    expect(renewed.every((t) => t !== undefined && t.claims.iat > held.claims.iat)).toBe(true);
    expect(await whoIs(cluster?.kubeconfig ?? "", renewed.at(-1)?.token ?? "")).toBe(username);
  }, 150_000);
});
