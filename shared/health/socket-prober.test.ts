import net from "node:net";
import { Duplex } from "node:stream";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ForwardProxy,
  makeSelfSignedCert,
  startForwardProxy,
  startHttpsTarget,
  startHttpTarget,
  type Target,
  type TlsMaterial,
  unusedPort,
} from "../../test/support/probe-fixtures.ts";
import type { ProbeTarget } from "./probe.ts";
import { createSocketProber, type SocketConnect, type WorkerSocket } from "./socket-prober.ts";

/** A node:net stand-in for `connect` from "cloudflare:sockets" (same stream shapes, same startTls). */
function nodeConnect(ca: string): SocketConnect {
  const wrap = (socket: net.Socket): WorkerSocket => {
    const web = Duplex.toWeb(socket) as unknown as {
      readable: ReadableStream<Uint8Array>;
      writable: WritableStream<Uint8Array>;
    };
    return {
      readable: web.readable,
      writable: web.writable,
      close: async () => {
        socket.destroy();
      },
      startTls: (options) => wrap(tls.connect({ socket, servername: options?.expectedServerHostname, ca })),
    };
  };
  return (address) => wrap(net.connect(address.port, address.hostname));
}

let proxy: ForwardProxy;
let httpTarget: Target;
let hanging: Target;
let httpsTarget: Target;
let material: TlsMaterial;

beforeAll(async () => {
  material = makeSelfSignedCert();
  [proxy, httpTarget, hanging, httpsTarget] = await Promise.all([
    startForwardProxy(),
    startHttpTarget({ status: 204 }),
    startHttpTarget({ hang: true }),
    startHttpsTarget(material),
  ]);
});

afterAll(async () => {
  await Promise.all([proxy, httpTarget, hanging, httpsTarget].map((s) => s?.close()));
});

function target(url: string, over: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    proxy: { host: "127.0.0.1", port: proxy.port, scheme: "http" },
    url,
    expectedStatus: 204,
    timeoutMs: 2000,
    ...over,
  };
}

describe("socket prober (Workers connect(), driven over node:net)", () => {
  it("http: absolute-form GET through the proxy, status line parsed", async () => {
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const before = proxy.requests.length;
    const url = `http://127.0.0.1:${httpTarget.port}/healthz?x=1`;
    const result = await prober.probe(target(url));
    expect(result).toMatchObject({ ok: true, status: 204 });
    expect(proxy.requests.slice(before)).toEqual([url]);
  });

  it("http: status mismatch → ok: false", async () => {
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const result = await prober.probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, { expectedStatus: 200 }),
    );
    expect(result).toMatchObject({ ok: false, status: 204 });
  });

  it("https: CONNECT, then TLS inside the tunnel, once per probe", async () => {
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const before = { connects: proxy.connects.length, connections: proxy.connections };
    for (let i = 0; i < 2; i++) {
      const result = await prober.probe(
        target(`https://127.0.0.1:${httpsTarget.port}/`, { expectedStatus: 200 }),
      );
      expect(result).toMatchObject({ ok: true, status: 200 });
    }
    expect(proxy.connects.slice(before.connects)).toEqual([
      `127.0.0.1:${httpsTarget.port}`,
      `127.0.0.1:${httpsTarget.port}`,
    ]);
    expect(proxy.connections - before.connections).toBe(2);
  });

  it("https: a CONNECT the proxy cannot complete → ok: false", async () => {
    const port = await unusedPort();
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const result = await prober.probe(target(`https://127.0.0.1:${port}/`, { expectedStatus: 200 }));
    expect(result.ok).toBe(false);
    expect(result.error).toContain("502");
  });

  it("proxy down → ok: false with an error", async () => {
    const port = await unusedPort();
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const result = await prober.probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, { proxy: { host: "127.0.0.1", port, scheme: "http" } }),
    );
    expect(result.ok).toBe(false);
    expect(result.error).toBeTruthy();
  });

  it("timeout → ok: false", async () => {
    const prober = createSocketProber({ connect: nodeConnect(material.cert) });
    const result = await prober.probe(target(`http://127.0.0.1:${hanging.port}/`, { timeoutMs: 200 }));
    expect(result).toMatchObject({ ok: false, error: "timed out after 200 ms" });
  });

  it("https URL through an https proxy is refused with a clear error", async () => {
    const prober = createSocketProber({
      connect: () => {
        throw new Error("must not connect");
      },
    });
    const result = await prober.probe(
      target("https://example.com/", { proxy: { host: "127.0.0.1", port: 1, scheme: "https" } }),
    );
    expect(result.error).toContain("not supported on Workers");
  });

  it.each([
    {
      name: "a status line sent a byte at a time is read whole",
      answer: ["HTTP/1.1 204 No Content\r\n\r\n"],
      byByte: true,
      expected: { ok: true, status: 204 },
    },
    {
      name: "a status line split over two writes, its CR LF apart",
      answer: ["HTTP/1.0 503 Unavail\r", "\nServer: x\r\n\r\n"],
      byByte: false,
      expected: { ok: false, status: 503, error: "status 503, expected 204" },
    },
    {
      name: "a CR without LF is not the line's end: the head runs past 16 KB and is refused",
      answer: [`HTTP/1.1 204 ${"x\r".repeat(9000)}`],
      byByte: false,
      expected: { ok: false, error: "response head too large" },
    },
    {
      name: "closed before any byte",
      answer: [],
      byByte: false,
      expected: { ok: false, error: "connection closed before a response" },
    },
    {
      name: "closed mid status line",
      answer: ["HTTP/1.1 2"],
      byByte: false,
      expected: { ok: false, error: "connection closed mid-response" },
    },
    {
      name: "not HTTP",
      answer: ["SSH-2.0-OpenSSH\r\n"],
      byByte: false,
      expected: { ok: false, error: 'not an HTTP response: "SSH-2.0-OpenSSH"' },
    },
  ])("http: $name", async ({ answer, byByte, expected }) => {
    // A "proxy" that answers the request with these bytes, then closes.
    const server = net.createServer((socket) => {
      socket.once("data", async () => {
        for (const part of answer)
          for (const piece of byByte ? [...part] : [part]) {
            socket.write(Buffer.from(piece, "latin1"));
            await new Promise((r) => setTimeout(r, 2));
          }
        socket.end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const port = (server.address() as net.AddressInfo).port;
      const prober = createSocketProber({ connect: nodeConnect(material.cert) });
      const result = await prober.probe(
        target("http://127.0.0.1:9/", { proxy: { host: "127.0.0.1", port, scheme: "http" } }),
      );
      expect(result).toMatchObject(expected);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
