import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import { makeSelfSignedCert } from "../../test/support/probe-fixtures.ts";
import { NetworkError, NotFoundError, TimeoutError, UnauthorizedError } from "./errors.ts";
import { createKube } from "./kube.ts";
import { createNodeTransport, type NodeTransportOptions } from "./node-transport.ts";
import { Resources } from "./resources.ts";

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

async function serve(
  handler: (req: IncomingMessage, body: string) => { status: number; body: string; delayMs?: number },
) {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const answer = handler(req, Buffer.concat(chunks).toString("utf8"));
    if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
    res.writeHead(answer.status, { "content-type": "application/json", "retry-after": "3" }).end(answer.body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** client-node only allows plain HTTP with insecure-skip-tls-verify. */
function kubeConfigFor(url: string, token = "s3cret"): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: url, skipTLSVerify: true }],
    users: [{ name: "u", token }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

describe.each(["http1", "h2"] as const)("createNodeTransport (%s)", (http) => {
  const create = (kc: KubeConfig, options: NodeTransportOptions = {}) =>
    createNodeTransport(kc, { ...options, http });

  it("authenticates from the kubeconfig and round-trips a request", async () => {
    const seen: { method?: string; url?: string; auth?: string; type?: string; body?: string }[] = [];
    const url = await serve((req, body) => {
      seen.push({
        method: req.method,
        url: req.url,
        auth: req.headers.authorization,
        type: req.headers["content-type"],
        body,
      });
      return { status: 201, body: '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}' };
    });
    const kube = createKube(create(kubeConfigFor(url)));
    const created = await kube.create(Resources.ConfigMap, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "a", namespace: "n s" },
    });
    expect(created.metadata.name).toBe("a");
    expect(seen).toEqual([
      {
        method: "POST",
        url: "/api/v1/namespaces/n%20s/configmaps?fieldManager=kubefn",
        auth: "Bearer s3cret",
        type: "application/json",
        body: '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n s"}}',
      },
    ]);
  });

  it("passes status and headers through for createKube to decode", async () => {
    const url = await serve(() => ({
      status: 404,
      body: '{"kind":"Status","reason":"NotFound","message":"nope","code":404}',
    }));
    const transport = create(kubeConfigFor(url));
    const res = await transport.request({ method: "GET", path: "/api/v1/namespaces/x" });
    expect(res.status).toBe(404);
    expect(res.headers.get("retry-after")).toBe("3");
    await expect(createKube(transport).get(Resources.Namespace, { name: "x" })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it("re-runs an exec credential plugin per request once its token has expired", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-exec-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const counter = join(dir, "n");
    writeFileSync(counter, "0");
    // Each run bumps a counter and hands out token-<n>, already expired, so client-node asks again.
    const plugin = [
      "const fs = require('node:fs');",
      `const n = Number(fs.readFileSync(${JSON.stringify(counter)}, 'utf8')) + 1;`,
      `fs.writeFileSync(${JSON.stringify(counter)}, String(n));`,
      "process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',",
      "  status: { token: 'token-' + n, expirationTimestamp: '2000-01-01T00:00:00Z' } }));",
    ].join("\n");
    const auths: (string | undefined)[] = [];
    const url = await serve((req) => {
      auths.push(req.headers.authorization);
      return { status: 200, body: "{}" };
    });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: url, skipTLSVerify: true }],
      users: [
        {
          name: "u",
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: process.execPath,
            args: ["-e", plugin],
            interactiveMode: "Never",
          },
        },
      ],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const transport = create(kc);
    await transport.request({ method: "GET", path: "/api" });
    await transport.request({ method: "GET", path: "/api" });
    expect(auths).toEqual(["Bearer token-1", "Bearer token-2"]);
  });

  it("runs an exec plugin again on a 401 before its credential's expiry, and keeps the new credential", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-exec-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const counter = join(dir, "n");
    writeFileSync(counter, "0");
    // Each run hands out token-<n>, valid (so client-node alone would keep it) for centuries.
    const plugin = [
      "const fs = require('node:fs');",
      `const n = Number(fs.readFileSync(${JSON.stringify(counter)}, 'utf8')) + 1;`,
      `fs.writeFileSync(${JSON.stringify(counter)}, String(n));`,
      "process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',",
      "  status: { token: 'token-' + n, expirationTimestamp: '2999-01-01T00:00:00Z' } }));",
    ].join("\n");
    const auths: (string | undefined)[] = [];
    const url = await serve((req) => {
      auths.push(req.headers.authorization);
      return req.headers.authorization === "Bearer token-1"
        ? { status: 401, body: '{"kind":"Status","code":401,"reason":"Unauthorized"}' }
        : { status: 200, body: "{}" };
    });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: url, skipTLSVerify: true }],
      users: [
        {
          name: "u",
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: process.execPath,
            args: ["-e", plugin],
            interactiveMode: "Never",
          },
        },
      ],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const transport = create(kc);
    expect((await transport.request({ method: "GET", path: "/api" })).status).toBe(200);
    expect((await transport.request({ method: "GET", path: "/api" })).status).toBe(200);
    expect(auths).toEqual(["Bearer token-1", "Bearer token-2", "Bearer token-2"]);
    expect(readFileSync(counter, "utf8")).toBe("2");
  });

  it("returns a 401 for a static token after one request", async () => {
    let requests = 0;
    const url = await serve(() => {
      requests++;
      return { status: 401, body: '{"kind":"Status","code":401,"reason":"Unauthorized"}' };
    });
    const res = await create(kubeConfigFor(url)).request({ method: "GET", path: "/api" });
    expect([res.status, requests]).toEqual([401, 1]);
  });

  it("with a token source: its token replaces the kubeconfig user's, and a 401 is sent once more with the renewed one", async () => {
    const auths: (string | undefined)[] = [];
    const url = await serve((req) => {
      auths.push(req.headers.authorization);
      return req.headers.authorization === "Bearer new"
        ? { status: 200, body: "{}" }
        : { status: 401, body: '{"kind":"Status","code":401,"reason":"Unauthorized"}' };
    });
    const renewed: string[] = [];
    const tokenSource = {
      token: async () => (renewed.length === 0 ? "old" : "new"),
      renew: async (rejected: string) => {
        renewed.push(rejected);
        return "new";
      },
    };
    const transport = create(kubeConfigFor(url, "kubeconfig-token"), { tokenSource });
    expect((await transport.request({ method: "GET", path: "/api" })).status).toBe(200);
    expect((await transport.request({ method: "GET", path: "/api" })).status).toBe(200);
    expect(auths).toEqual(["Bearer old", "Bearer new", "Bearer new"]);
    expect(renewed).toEqual(["old"]);
  });

  it("with a token source that has nothing newer, the 401 stands after one request", async () => {
    let requests = 0;
    const url = await serve(() => {
      requests++;
      return { status: 401, body: '{"kind":"Status","code":401,"reason":"Unauthorized"}' };
    });
    const tokenSource = { token: async () => "revoked", renew: async () => undefined };
    const transport = create(kubeConfigFor(url), { tokenSource });
    await expect(createKube(transport).get(Resources.Namespace, { name: "x" })).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    expect(requests).toBe(1);
  });

  it("gives a TimeoutError past its deadline", async () => {
    const url = await serve(() => ({ status: 200, body: "{}", delayMs: 500 }));
    const transport = create(kubeConfigFor(url), { timeoutMs: 50 });
    const err = await transport.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
  });

  it("gives a NetworkError when nothing listens", async () => {
    const transport = create(kubeConfigFor("http://127.0.0.1:1"));
    const err = await transport.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });

  it("reuses one connection for sequential requests (keep-alive), instead of one per request", async () => {
    const url = await serve(() => ({ status: 200, body: "{}" }));
    let connections = 0;
    server!.on("connection", () => connections++);
    const transport = create(kubeConfigFor(url));
    for (let i = 0; i < 20; i++) await transport.request({ method: "GET", path: "/api" });
    // undici's pool hands a connection back one tick after its response ends, so a request sent
    // at once after the first may open a second connection; the rest reuse those.
    expect(connections).toBeLessThanOrEqual(2);
  });

  it("sends once more on a new connection when the server closed the reused one", async () => {
    const requestsOnSocket = new Map<unknown, number>();
    let answered = 0;
    server = createServer((req, res) => {
      const n = (requestsOnSocket.get(req.socket) ?? 0) + 1;
      requestsOnSocket.set(req.socket, n);
      // The second request on a connection finds it closed, as after the server's idle timeout.
      if (n === 2) {
        req.socket.destroy();
        return;
      }
      answered++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const transport = create(kubeConfigFor(url));
    await transport.request({ method: "GET", path: "/api" });
    const res = await transport.request({ method: "GET", path: "/api" });
    expect(res.status).toBe(200);
    expect(answered).toBe(2);
    expect(requestsOnSocket.size).toBe(2);
  });

  it("verifies the server with the kubeconfig's CA, and refuses a server it does not sign", async () => {
    const tls = makeSelfSignedCert();
    const url = await serveTls(tls, () => undefined);
    const trusted = await create(kubeConfigWithCa(url, tls.cert)).request({ method: "GET", path: "/api" });
    expect(trusted.status).toBe(200);
    const other = makeSelfSignedCert();
    const err = await create(kubeConfigWithCa(url, other.cert))
      .request({ method: "GET", path: "/api" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
  });

  it("over TLS, multiplexes concurrent requests on one HTTP/2 connection (h2), or opens HTTP/1.1 connections", async () => {
    const tls = makeSelfSignedCert();
    const versions: string[] = [];
    const url = await serveTls(tls, (version) => versions.push(version));
    let connections = 0;
    tlsServer!.on("secureConnection", () => connections++);
    const transport = create(kubeConfigWithCa(url, tls.cert));
    const answers = await Promise.all(
      Array.from({ length: 16 }, () => transport.request({ method: "GET", path: "/api" })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(16).fill(200));
    if (http === "h2") {
      expect([connections, new Set(versions)]).toEqual([1, new Set(["2.0"])]);
    } else {
      expect(new Set(versions)).toEqual(new Set(["1.1"]));
      expect(connections).toBeGreaterThan(1);
    }
  });
});

let tlsServer: Http2SecureServer | undefined;
afterEach(async () => {
  const s = tlsServer;
  tlsServer = undefined;
  if (s) await new Promise((resolve) => s.close(resolve));
});

/** A TLS server offering HTTP/2 and HTTP/1.1 (ALPN), as the API server does; answers 200 after 20 ms. */
async function serveTls(tls: { cert: string; key: string }, seen: (httpVersion: string) => void) {
  tlsServer = createSecureServer({ ...tls, allowHTTP1: true }, (req, res) => {
    seen(req.httpVersion);
    setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end("{}"), 20);
  });
  const sessions = new Set<{ destroy(): void }>();
  tlsServer.on("session", (session) => sessions.add(session));
  tlsServer.on("secureConnection", (socket) => sessions.add(socket));
  onTestFinished(() => {
    for (const s of sessions) s.destroy();
  });
  tlsServer.listen(0, "127.0.0.1");
  await once(tlsServer, "listening");
  return `https://127.0.0.1:${(tlsServer.address() as AddressInfo).port}`;
}

function kubeConfigWithCa(url: string, caPem: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: url, caData: Buffer.from(caPem).toString("base64") }],
    users: [{ name: "u", token: "s3cret" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

describe.each(["http1", "h2"] as const)("createNodeTransport (%s) maxConnections", (http) => {
  it("opens no more connections than maxConnections; the other requests wait for one", async () => {
    const url = await serve(() => ({ status: 200, body: "{}", delayMs: 20 }));
    let connections = 0;
    server!.on("connection", () => connections++);
    const transport = createNodeTransport(kubeConfigFor(url), { http, maxConnections: 2 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => transport.request({ method: "GET", path: "/api" })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(connections).toBe(2);
  });
});
