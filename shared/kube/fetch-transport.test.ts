import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { NetworkError, TimeoutError } from "./errors.ts";
import { createFetchTransport } from "./fetch-transport.ts";

function recordingFetch(
  answer: () => Promise<Response> | Response = () => new Response("{}", { status: 200 }),
) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    calls.push({ url: String(input), init: init ?? {} });
    return answer();
  };
  return { fetch: fetch as typeof globalThis.fetch, calls };
}

describe("createFetchTransport", () => {
  it("sends the bearer token, content type and body to server + path", async () => {
    const { fetch, calls } = recordingFetch(
      () => new Response('{"ok":true}', { status: 201, headers: { "x-a": "1" } }),
    );
    const transport = createFetchTransport({
      server: "https://kube.example.com/prefix/",
      token: "t0k",
      fetch,
    });
    const res = await transport.request({
      method: "POST",
      path: "/api/v1/namespaces?fieldManager=kubefn",
      contentType: "application/json",
      body: "{}",
    });
    expect(res.status).toBe(201);
    expect(res.body).toBe('{"ok":true}');
    expect(res.headers.get("x-a")).toBe("1");
    expect(calls[0]!.url).toBe("https://kube.example.com/prefix/api/v1/namespaces?fieldManager=kubefn");
    const headers = new Headers(calls[0]!.init.headers);
    expect(headers.get("authorization")).toBe("Bearer t0k");
    expect(headers.get("content-type")).toBe("application/json");
    expect(headers.get("accept")).toBe("application/json");
    expect(calls[0]!.init.method).toBe("POST");
    expect(calls[0]!.init.body).toBe("{}");
  });

  it("asks a token function per request", async () => {
    const { fetch, calls } = recordingFetch();
    let n = 0;
    const transport = createFetchTransport({ server: "https://k", token: async () => `t${++n}`, fetch });
    await transport.request({ method: "GET", path: "/api" });
    await transport.request({ method: "GET", path: "/api" });
    expect(calls.map((c) => new Headers(c.init.headers).get("authorization"))).toEqual([
      "Bearer t1",
      "Bearer t2",
    ]);
  });

  it.each([
    ["a fresh token: the refused request is sent once more with it", "t2", [401, 200], 200],
    ["nothing newer: the 401 stands, sent once", undefined, [401], 401],
  ])("asks a token source to renew after a 401 — %s", async (_name, renewed, seen, status) => {
    const answers = [401, 200];
    const { fetch, calls } = recordingFetch(() => new Response("{}", { status: answers.shift() ?? 200 }));
    const transport = createFetchTransport({
      server: "https://k",
      tokenSource: {
        token: async () => "t1",
        renew: async (rejected) => (rejected === "t1" ? renewed : undefined),
      },
      fetch,
    });
    expect((await transport.request({ method: "GET", path: "/api" })).status).toBe(status);
    expect(calls.map((c) => new Headers(c.init.headers).get("authorization"))).toEqual(
      ["Bearer t1", "Bearer t2"].slice(0, seen.length),
    );
  });

  it("gives a TimeoutError when the deadline passes", async () => {
    const fetch = ((_: unknown, init?: RequestInit) =>
      new Promise((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      })) as typeof globalThis.fetch;
    const transport = createFetchTransport({ server: "https://k", fetch, timeoutMs: 20 });
    const err = await transport.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err).toMatchObject({ status: 0, reason: "ClientTimeout" });
  });

  it("gives a NetworkError when the caller aborts", async () => {
    const fetch = ((_: unknown, init?: RequestInit) =>
      new Promise((_resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      })) as typeof globalThis.fetch;
    const controller = new AbortController();
    const transport = createFetchTransport({ server: "https://k", fetch });
    const pending = transport
      .request({ method: "GET", path: "/api", signal: controller.signal })
      .catch((e: unknown) => e);
    controller.abort();
    const err = await pending;
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).toMatchObject({ reason: "Aborted" });
  });

  it("gives a NetworkError when nothing listens", async () => {
    const transport = createFetchTransport({ server: "http://127.0.0.1:1" });
    const err = await transport.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).message).toMatch(/ECONNREFUSED|fetch failed/);
  });
});

describe("the neutral entry point (shared/kube/index.ts)", () => {
  it("bundles for the browser/workerd with no node: imports and no client-node", async () => {
    const entry = fileURLToPath(new URL("./index.ts", import.meta.url));
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      write: false,
      platform: "neutral",
      format: "esm",
      metafile: true,
      logLevel: "silent",
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.filter((p) => p.includes("node_modules"))).toEqual([]);
    expect(inputs.some((p) => p.endsWith("fetch-transport.ts"))).toBe(true);
    const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
    expect(imports).toEqual([]);
    const code = result.outputFiles[0]!.text;
    expect(code).not.toMatch(/from\s*["']node:|require\(["']node:|@kubernetes\/client-node/);
  });

  it("reuses the platform's pooled connection for sequential requests (Node's fetch)", async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    let connections = 0;
    server.on("connection", () => connections++);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const transport = createFetchTransport({
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        token: "t",
      });
      for (let i = 0; i < 20; i++) await transport.request({ method: "GET", path: "/api" });
      // undici keeps a small pool and alternates between two sockets; without reuse it would be 20.
      expect(connections).toBeLessThanOrEqual(2);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("createFetchTransport and redirects", () => {
  it("never follows a redirect, so the bearer token never reaches where it points", async () => {
    const { createServer } = await import("node:http");
    const seen: string[] = [];
    const elsewhere = createServer((req, res) => {
      seen.push(req.headers.authorization ?? "(none)");
      res.end("{}");
    });
    await new Promise<void>((r) => elsewhere.listen(0, "127.0.0.1", r));
    const elsewherePort = (elsewhere.address() as { port: number }).port;
    const api = createServer((_req, res) => {
      res.writeHead(307, { location: `http://localhost:${elsewherePort}/steal` }).end();
    });
    await new Promise<void>((r) => api.listen(0, "127.0.0.1", r));
    const apiPort = (api.address() as { port: number }).port;
    try {
      const transport = createFetchTransport({
        server: `http://127.0.0.1:${apiPort}`,
        token: "secret-token",
      });
      const res = await transport.request({ method: "GET", path: "/api/v1/namespaces" });
      expect(res.status).toBe(307);
      expect(seen).toEqual([]);
    } finally {
      api.close();
      elsewhere.close();
    }
  });
});
