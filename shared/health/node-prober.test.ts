import net from "node:net";
import { createServer as createTlsServer, type Server as TlsServer } from "node:tls";
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
import type { ProbeTarget } from "./index.ts";
import { createNodeProber } from "./node-prober.ts";
import { parseProbeAllowList } from "./target.ts";

/** The fixtures listen on loopback: the operator's allow-list admits it (PROBE_ALLOWED_CIDRS). */
const loopbackAllowed = (() => {
  const parsed = parseProbeAllowList(["127.0.0.0/8", "::1/128"]);
  if (!parsed.ok) throw new Error("bad allow-list");
  return { allow: parsed.allowList };
})();

let proxy: ForwardProxy;
let httpTarget: Target;
let teapot: Target;
let hanging: Target;
let httpsTarget: Target;
let tls: TlsMaterial;
/** TLS in front of `proxy`: an https proxy (scheme "https"). */
let tlsProxy: TlsServer;
let tlsProxyPort: number;

beforeAll(async () => {
  tls = makeSelfSignedCert();
  [proxy, httpTarget, teapot, hanging, httpsTarget] = await Promise.all([
    startForwardProxy(),
    startHttpTarget(),
    startHttpTarget({ status: 418 }),
    startHttpTarget({ hang: true }),
    startHttpsTarget(tls),
  ]);
  tlsProxy = createTlsServer({ cert: tls.cert, key: tls.key }, (client) => {
    const upstream = net.connect(proxy.port, "127.0.0.1");
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
  });
  await new Promise<void>((resolve) => tlsProxy.listen(0, "127.0.0.1", resolve));
  tlsProxyPort = (tlsProxy.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (tlsProxy ? tlsProxy.close(() => resolve()) : resolve()));
  await Promise.all([proxy, httpTarget, teapot, hanging, httpsTarget].map((s) => s?.close()));
});

function target(url: string, over: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    proxy: { host: "127.0.0.1", port: proxy.port, scheme: "http" },
    url,
    expectedStatus: 200,
    timeoutMs: 2000,
    policy: loopbackAllowed,
    ...over,
  };
}

describe("node prober (real proxy, real targets)", () => {
  it("http probe URL: absolute-form GET through the proxy", async () => {
    const before = { requests: proxy.requests.length, hits: httpTarget.hits };
    const url = `http://127.0.0.1:${httpTarget.port}/healthz`;
    const result = await createNodeProber().probe(target(url));
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(result.error).toBeUndefined();
    expect(result.latencyMs).toBeGreaterThan(0);
    expect(proxy.requests.slice(before.requests)).toEqual([url]);
    expect(httpTarget.hits).toBe(before.hits + 1);
  });

  it("unexpected status → ok: false with the status", async () => {
    const result = await createNodeProber().probe(target(`http://127.0.0.1:${teapot.port}/`));
    expect(result).toMatchObject({ ok: false, status: 418 });
    expect(result.error).toContain("418");
  });

  it("an expected non-200 status is success", async () => {
    const result = await createNodeProber().probe(
      target(`http://127.0.0.1:${teapot.port}/`, { expectedStatus: 418 }),
    );
    expect(result).toMatchObject({ ok: true, status: 418 });
  });

  it("proxy down → ok: false with an error", async () => {
    const port = await unusedPort();
    const result = await createNodeProber().probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, { proxy: { host: "127.0.0.1", port, scheme: "http" } }),
    );
    expect(result.ok).toBe(false);
    expect(result.status).toBeUndefined();
    expect(result.error).toMatch(/ECONNREFUSED|connect/i);
  });

  it("a hanging target → ok: false at the timeout", async () => {
    const started = performance.now();
    const result = await createNodeProber().probe(
      target(`http://127.0.0.1:${hanging.port}/`, { timeoutMs: 300 }),
    );
    const took = performance.now() - started;
    expect(result.ok).toBe(false);
    expect(result.error).toContain("timed out after 300 ms");
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(2000);
  });

  it("https probe URL: CONNECT through the proxy, TLS inside the tunnel", async () => {
    const before = proxy.connects.length;
    const result = await createNodeProber({ ca: tls.cert }).probe(
      target(`https://127.0.0.1:${httpsTarget.port}/`),
    );
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(proxy.connects.slice(before)).toEqual([`127.0.0.1:${httpsTarget.port}`]);
  });

  it("https: every probe performs its own CONNECT on a new connection (no kept-alive tunnel)", async () => {
    const prober = createNodeProber({ ca: tls.cert });
    const before = {
      connects: proxy.connects.length,
      connections: proxy.connections,
      hits: httpsTarget.hits,
    };
    for (let i = 0; i < 3; i++) {
      expect((await prober.probe(target(`https://127.0.0.1:${httpsTarget.port}/`))).ok).toBe(true);
    }
    expect(proxy.connects.length - before.connects).toBe(3);
    expect(proxy.connections - before.connections).toBe(3);
    expect(httpsTarget.hits - before.hits).toBe(3);
  });

  it("http: every probe opens a new connection to the proxy", async () => {
    const prober = createNodeProber();
    const before = proxy.connections;
    for (let i = 0; i < 3; i++) {
      expect((await prober.probe(target(`http://127.0.0.1:${httpTarget.port}/`))).ok).toBe(true);
    }
    expect(proxy.connections - before).toBe(3);
  });

  it("an https proxy: TLS to the proxy (verified with the given CA), then the probe inside it", async () => {
    const before = proxy.requests.length;
    const result = await createNodeProber({ ca: tls.cert }).probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, {
        proxy: { host: "127.0.0.1", port: tlsProxyPort, scheme: "https" },
      }),
    );
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(proxy.requests.slice(before)).toEqual([`http://127.0.0.1:${httpTarget.port}/`]);
  });

  it("an https proxy whose certificate is not trusted fails the probe", async () => {
    const result = await createNodeProber().probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, {
        proxy: { host: "127.0.0.1", port: tlsProxyPort, scheme: "https" },
      }),
    );
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/certificate|self.signed/i);
  });

  it("an https probe URL through an https proxy: CONNECT inside TLS, TLS inside the tunnel", async () => {
    const before = proxy.connects.length;
    const result = await createNodeProber({ ca: tls.cert }).probe(
      target(`https://127.0.0.1:${httpsTarget.port}/`, {
        proxy: { host: "127.0.0.1", port: tlsProxyPort, scheme: "https" },
      }),
    );
    expect(result).toMatchObject({ ok: true, status: 200 });
    expect(proxy.connects.slice(before)).toEqual([`127.0.0.1:${httpsTarget.port}`]);
  });

  it("https: an untrusted certificate fails the probe", async () => {
    const result = await createNodeProber().probe(target(`https://127.0.0.1:${httpsTarget.port}/`));
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/certificate|self.signed/i);
  });

  it("https: rejectUnauthorized: false (tests only) skips verification", async () => {
    const result = await createNodeProber({ rejectUnauthorized: false }).probe(
      target(`https://127.0.0.1:${httpsTarget.port}/`),
    );
    expect(result.ok).toBe(true);
  });

  it("resolves the proxy name and connects to the resolved address", async () => {
    const resolved: string[] = [];
    const prober = createNodeProber({
      resolve: async (host) => {
        resolved.push(host);
        return ["127.0.0.1"];
      },
    });
    const result = await prober.probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, {
        proxy: { host: "proxy.test", port: proxy.port, scheme: "http" },
      }),
    );
    expect(resolved).toEqual(["proxy.test"]);
    expect(result.ok).toBe(true);
  });

  it.each([
    ["a name resolving to the metadata address", "proxy.test", ["169.254.169.254"], "MetadataAddress"],
    ["a name with one bad address among good ones", "proxy.test", ["127.0.0.1", "fe80::1"], "LinkLocal"],
    ["a metadata literal", "169.254.169.254", [], "MetadataAddress"],
    ["an integer-spelled metadata literal", "::ffff:a9fe:a9fe", [], "MetadataAddress"],
  ])("refuses %s and never connects", async (_name, host, addresses, reason) => {
    const before = proxy.connections;
    const prober = createNodeProber({ resolve: async () => addresses });
    const result = await prober.probe(
      target("http://example.com/", { proxy: { host, port: proxy.port, scheme: "http" } }),
    );
    expect(result.ok).toBe(false);
    expect(result.refused?.reason).toBe(reason);
    expect(proxy.connections).toBe(before);
  });

  it.each([
    ["a name resolving to loopback", "proxy.test", ["127.0.0.1"], "Loopback"],
    ["a name resolving to a private address", "proxy.test", ["10.1.2.3"], "PrivateAddress"],
    [
      "a name with one private address among public ones",
      "proxy.test",
      ["198.51.100.7", "fd12::1"],
      "PrivateAddress",
    ],
    ["a loopback literal", "127.0.0.1", [], "Loopback"],
  ])(
    "a tenant's proxy: refuses %s without the operator's allow-list, and never connects",
    async (_n, host, addresses, reason) => {
      const before = proxy.connections;
      const prober = createNodeProber({ resolve: async () => addresses });
      const result = await prober.probe(
        target("http://example.com/", { proxy: { host, port: proxy.port, scheme: "http" }, policy: {} }),
      );
      expect(result.refused?.reason).toBe(reason);
      expect(proxy.connections).toBe(before);
    },
  );

  it("resolves once and connects to the address it checked: a rebinding answer is never used", async () => {
    const answers = [["127.0.0.1"], ["169.254.169.254"]];
    let lookups = 0;
    const prober = createNodeProber({ resolve: async () => answers[Math.min(lookups++, 1)]! });
    const before = proxy.connections;
    const result = await prober.probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, {
        proxy: { host: "rebind.test", port: proxy.port, scheme: "http" },
      }),
    );
    expect(result.ok).toBe(true);
    expect(lookups).toBe(1);
    expect(proxy.connections).toBe(before + 1);
  });

  it("a resolver failure is a failed probe, not a refusal", async () => {
    const prober = createNodeProber({
      resolve: async () => {
        throw Object.assign(new Error("getaddrinfo ENOTFOUND nope.test"), { code: "ENOTFOUND" });
      },
    });
    const result = await prober.probe(
      target("http://example.com/", { proxy: { host: "nope.test", port: 1, scheme: "http" } }),
    );
    expect(result).toMatchObject({ ok: false });
    expect(result.refused).toBeUndefined();
    expect(result.error).toContain("ENOTFOUND");
  });

  it("the default resolver accepts localhost where the operator allows loopback", async () => {
    const result = await createNodeProber().probe(
      target(`http://127.0.0.1:${httpTarget.port}/`, {
        proxy: { host: "localhost", port: proxy.port, scheme: "http" },
      }),
    );
    // localhost may resolve to ::1 first, where the proxy does not listen; either way it is not refused.
    expect(result.refused).toBeUndefined();
  });
});
