import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Resources } from "../../shared/kube/index.ts";
import { makeSelfSignedCert } from "../../test/support/probe-fixtures.ts";
import { connectRelay, parseRelayEnv } from "./main.ts";

/**
 * The relay in a Pod reads its ServiceAccount token through kubefn's token source: a token the
 * kubelet replaced is used at once after a 401, where client-node's in-cluster loading kept the
 * revoked one for up to 60 s.
 */
let server: Server;
let port: number;
let dir: string;
const seen: string[] = [];
const revoked = new Set<string>();

beforeAll(async () => {
  const tls = makeSelfSignedCert();
  dir = mkdtempSync(join(tmpdir(), "kubefn-relay-sa-"));
  writeFileSync(join(dir, "ca.crt"), tls.cert);
  writeFileSync(join(dir, "namespace"), "kubefn-system");
  writeFileSync(join(dir, "token"), "first");
  server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    seen.push(token);
    if (revoked.has(token)) {
      res.writeHead(401, { "content-type": "application/json" }).end(
        JSON.stringify({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          reason: "Unauthorized",
          code: 401,
        }),
      );
      return;
    }
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "kubefn-system" } }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("connectRelay in a Pod", () => {
  it("sends the volume's token, and after a 401 the token that replaced it, within the same request", async () => {
    const env = parseRelayEnv({
      KUBEFN_INTAKE_URL: "http://127.0.0.1:1/v1/events",
      KUBEFN_RELAY_SECRET: "0123456789abcdef0123",
      KUBERNETES_SERVICE_HOST: "127.0.0.1",
      KUBERNETES_SERVICE_PORT: String(port),
      KUBEFN_SERVICE_ACCOUNT_DIR: dir,
    });
    const { kube } = connectRelay(env);
    await kube.get(Resources.Namespace, { name: "kubefn-system" });
    expect(seen).toEqual(["first"]);
    // The kubelet rotates the token and the old one is revoked, within the source's 1 s recheck.
    writeFileSync(join(dir, "token"), "second-token");
    revoked.add("first");
    await kube.get(Resources.Namespace, { name: "kubefn-system" });
    expect(seen).toEqual(["first", "first", "second-token"]);
  });

  it("refuses to start with neither a kubeconfig nor a Pod's API server", () => {
    const env = parseRelayEnv({
      KUBEFN_INTAKE_URL: "http://127.0.0.1:1/v1/events",
      KUBEFN_RELAY_SECRET: "0123456789abcdef0123",
    });
    expect(() => connectRelay(env)).toThrow(/neither KUBECONFIG nor KUBERNETES_SERVICE_HOST/);
  });
});
