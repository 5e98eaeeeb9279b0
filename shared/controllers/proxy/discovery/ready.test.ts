import { describe, expect, it } from "vitest";
import { type TestProxy, testProxy } from "../../../../test/support/proxies.ts";
import { parseLabelSelector } from "../../../kube/index.ts";
import { type Proxy as ProxyObject, parseProxy } from "../api.ts";
import { isProxyReady, proxyEndpoint, type ReadyFilter, selectReady } from "./ready.ts";

function proxies(...specs: TestProxy[]): ProxyObject[] {
  return specs.map((s) => {
    const parsed = parseProxy(testProxy(s));
    if (!parsed.success) throw new Error(parsed.error.message);
    return parsed.data;
  });
}

function selector(text: string): ReadyFilter["selector"] {
  const parsed = parseLabelSelector(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.requirements;
}

describe("selectReady", () => {
  it.each<[string, TestProxy[], ReadyFilter, string[]]>([
    ["nothing listed", [], {}, []],
    [
      "orders by latency ascending, missing latency last",
      [{ name: "none" }, { name: "slow", latencyMillis: 300 }, { name: "fast", latencyMillis: 20 }],
      {},
      ["crawl/fast", "crawl/slow", "crawl/none"],
    ],
    [
      "breaks latency ties by namespace and name",
      [
        { name: "b", latencyMillis: 5 },
        { name: "a", latencyMillis: 5 },
        { namespace: "aaa", name: "z", latencyMillis: 5 },
      ],
      {},
      ["aaa/z", "crawl/a", "crawl/b"],
    ],
    [
      "drops proxies not Ready",
      [
        { name: "ready" },
        { name: "unhealthy", phase: "Unhealthy" },
        { name: "provisioning", phase: "Provisioning" },
        { name: "deleting", deleting: true },
        // Ready without a health check means provisioned, not probed: never offered.
        { name: "unprobed", noHealthCheck: true },
        { name: "unprobed-managed", mode: "Managed", ip: "10.2.2.2", noHealthCheck: true },
      ],
      {},
      ["crawl/ready"],
    ],
    [
      "drops a Ready Managed proxy without an address",
      [
        { name: "managed", mode: "Managed" },
        { name: "managed-ip", mode: "Managed", ip: "10.1.1.1" },
      ],
      {},
      ["crawl/managed-ip"],
    ],
    [
      "filters by namespace",
      [{ name: "a" }, { namespace: "other", name: "b" }],
      { namespace: "other" },
      ["other/b"],
    ],
    [
      "filters by selector",
      [{ name: "eu", labels: { region: "eu" } }, { name: "us", labels: { region: "us" } }, { name: "none" }],
      { selector: selector("region in (eu)") },
      ["crawl/eu"],
    ],
    [
      "an empty selector keeps everything",
      [{ name: "a" }, { name: "b" }],
      { selector: selector("") },
      ["crawl/a", "crawl/b"],
    ],
  ])("%s", (_, specs, filter, expected) => {
    expect(selectReady(proxies(...specs), filter).map((p) => `${p.namespace}/${p.name}`)).toEqual(expected);
  });

  it("reports the endpoint, latency and labels", () => {
    const [ready] = selectReady(
      proxies({
        name: "x",
        latencyMillis: 42,
        labels: { tier: "fast" },
        endpoint: { host: "1.2.3.4", port: 8443, scheme: "https" },
      }),
    );
    expect(ready).toEqual({
      namespace: "crawl",
      name: "x",
      uid: "uid-x",
      ip: "1.2.3.4",
      port: 8443,
      scheme: "https",
      latencyMillis: 42,
      labels: { tier: "fast" },
    });
  });
});

describe("proxyEndpoint", () => {
  it.each<[string, TestProxy, ReturnType<typeof proxyEndpoint>]>([
    [
      "External: spec.endpoint",
      { name: "e", endpoint: { host: "h.example", port: 8080, scheme: "https" } },
      { ip: "h.example", port: 8080, scheme: "https" },
    ],
    [
      "Managed: status.ip with the defaults 3128/http",
      { name: "m", mode: "Managed", ip: "10.0.0.9" },
      { ip: "10.0.0.9", port: 3128, scheme: "http" },
    ],
    [
      "Managed with spec.endpoint: its port and scheme",
      {
        name: "m",
        mode: "Managed",
        ip: "10.0.0.9",
        endpoint: { host: "ignored", port: 8888, scheme: "https" },
      },
      { ip: "10.0.0.9", port: 8888, scheme: "https" },
    ],
    ["no address yet", { name: "m", mode: "Managed" }, undefined],
  ])("%s", (_, spec, expected) => {
    const [proxy] = proxies(spec);
    if (!proxy) throw new Error("no proxy");
    expect(proxyEndpoint(proxy)).toEqual(expected);
  });

  it("isProxyReady needs an address", () => {
    const [proxy] = proxies({ name: "m", mode: "Managed" });
    if (!proxy) throw new Error("no proxy");
    expect(isProxyReady(proxy)).toBe(false);
  });
});
