/**
 * What the tests of kubefn as its own OIDC issuer share (issue 19, item 6): a CA and a loopback
 * certificate it signed, ES256 signing keys as JWKs, the API server's authentication
 * configuration that trusts the issuer, and kubefn's roles bound to the username its `sub` maps to.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { createServer } from "node:net";
import { join } from "node:path";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { installCrdsAndRbac, manifestsIn, optInNamespace } from "../../functions/node/install.ts";
import { DEFAULT_IDENTITY } from "../../shared/app/admission/index.ts";
import type { SigningJwk } from "../../shared/auth/index.ts";
import { type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";

/** A free loopback port (for an issuer URL that must be known before its server starts). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A CA and a certificate for 127.0.0.1 it signed (openssl), as files in `dir`. */
export function issueCertificates(dir: string): { ca: string; cert: string; key: string } {
  const at = (f: string) => join(dir, f);
  const openssl = (args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  openssl([
    "req",
    "-x509",
    ...ec,
    "-days",
    "1",
    "-subj",
    "/CN=kubefn test CA",
    "-keyout",
    at("ca.key"),
    "-out",
    at("ca.crt"),
  ]);
  openssl(["req", ...ec, "-subj", "/CN=127.0.0.1", "-keyout", at("tls.key"), "-out", at("tls.csr")]);
  writeFileSync(at("ext.cnf"), "subjectAltName=IP:127.0.0.1\n");
  openssl(
    [
      "x509",
      "-req",
      "-in",
      at("tls.csr"),
      "-CA",
      at("ca.crt"),
      "-CAkey",
      at("ca.key"),
      "-CAcreateserial",
    ].concat(["-days", "1", "-extfile", at("ext.cnf"), "-out", at("tls.crt")]),
  );
  return { ca: at("ca.crt"), cert: at("tls.crt"), key: at("tls.key") };
}

/** A new ES256 private key as a JWK with `kid` (as `OIDC_SIGNING_KEY` holds them). */
export async function privateJwk(kid: string): Promise<SigningJwk> {
  const pair = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ])) as CryptoKeyPair;
  return { ...(await crypto.subtle.exportKey("jwk", pair.privateKey)), kid } as SigningJwk;
}

/**
 * The claim validation rules of the authentication configuration docs/deploying/oidc-issuer.md
 * documents (its `AuthenticationConfiguration` block, read as YAML), so that the tests run the
 * API server with exactly what users are told to write.
 */
export function documentedClaimRules(): Array<{ expression: string; message: string }> {
  const doc = readFileSync(new URL("../../docs/deploying/oidc-issuer.md", import.meta.url), "utf8");
  const block = /```yaml\n(\s*apiVersion: apiserver\.config\.k8s\.io\/v1[\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/deploying/oidc-issuer.md: no AuthenticationConfiguration block");
  const lines = block.split("\n");
  const indent = /^\s*/.exec(lines[0] ?? "")?.[0].length ?? 0;
  const config = parseYaml(lines.map((l) => l.slice(indent)).join("\n")) as {
    jwt: Array<{ claimValidationRules?: Array<{ expression: string; message: string }> }>;
  };
  return config.jwt[0]?.claimValidationRules ?? [];
}

/**
 * Writes the API server's structured authentication configuration (`--authentication-config`)
 * to `dir`: one JWT authenticator for `issuer` (discovery and JWKS fetched over TLS, trusting
 * `caPem`), audience `kubefn`, the documented claim rules ({@link documentedClaimRules}), `sub`
 * mapped to `kubefn-oidc:<sub>`. Returns the file's path.
 */
export function writeAuthenticationConfig(dir: string, issuer: string, caPem: string): string {
  const path = join(dir, "authentication.yaml");
  writeFileSync(
    path,
    toYaml({
      apiVersion: "apiserver.config.k8s.io/v1",
      kind: "AuthenticationConfiguration",
      jwt: [
        {
          issuer: { url: issuer, audiences: ["kubefn"], certificateAuthority: caPem },
          claimValidationRules: documentedClaimRules(),
          claimMappings: { username: { claim: "sub", prefix: "kubefn-oidc:" } },
        },
      ],
    }),
  );
  return path;
}

/**
 * kubefn installed in a cluster whose API server trusts its issuer: the CRDs and roles (the
 * installer told kubefn's identities are the ServiceAccount and `username`), the tenant
 * `namespace` opted in, and every binding of kubefn's ServiceAccount (infra/rbac, the tenant's
 * `kubefn-tenant`) made for `username` as well.
 */
export async function installForIssuer(admin: Kube, username: string, namespace: string): Promise<void> {
  await installCrdsAndRbac(admin, 60_000, [DEFAULT_IDENTITY, username]);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(admin, namespace);
  type Binding = KubeObject & { subjects?: Array<{ kind: string; name: string }> };
  const bindings = (await manifestsIn("rbac")).filter(
    (o): o is Binding =>
      (o.kind === "ClusterRoleBinding" || o.kind === "RoleBinding") &&
      ((o as Binding).subjects ?? []).some((s) => s.kind === "ServiceAccount" && s.name === "kubefn"),
  );
  bindings.push(await admin.get<Binding>(Resources.RoleBinding, { namespace, name: "kubefn-tenant" }));
  for (const b of bindings) {
    await admin.create(b.kind === "RoleBinding" ? Resources.RoleBinding : Resources.ClusterRoleBinding, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: b.kind,
      metadata: {
        name: `${b.metadata.name}-oidc`,
        ...(b.metadata.namespace ? { namespace: b.metadata.namespace } : {}),
      },
      roleRef: b.roleRef,
      subjects: [{ kind: "User", apiGroup: "rbac.authorization.k8s.io", name: username }],
    });
  }
}

/** GET of JSON over HTTPS, trusting only `caPem`. */
export function getJson(url: string, caPem: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    request(url, { agent: new Agent({ ca: caPem }) }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve(JSON.parse(body) as Record<string, unknown>));
    })
      .on("error", reject)
      .end();
  });
}

/** Whom the API server of `kubeconfig` takes a bearer token for (a SelfSubjectReview), or the status it refuses with. */
export async function whoIs(kubeconfig: string, token: string): Promise<string | number> {
  const kc = loadKubeConfig({ file: kubeconfig });
  const res = await createNodeTransport(kc, {
    tokenSource: { token: async () => token, renew: async () => undefined },
  }).request({
    method: "POST",
    path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    contentType: "application/json",
    body: JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" }),
  });
  if (res.status !== 201) return res.status;
  return (JSON.parse(res.body) as { status: { userInfo: { username: string } } }).status.userInfo.username;
}
