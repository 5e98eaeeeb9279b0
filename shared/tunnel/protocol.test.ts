import { describe, expect, it } from "vitest";
import {
  admitTunnelRequest,
  isApiPath,
  signTunnelOpening,
  signTunnelRequest,
  TUNNEL_SKEW_SECONDS,
  verifyTunnelOpening,
} from "./protocol.ts";

const secret = "s".repeat(32);
const now = 1_800_000_000;
const request = {
  id: "0b7e2c1e-5f0e-4a53-9a53-0d4c1f7f6a10",
  time: now,
  method: "PATCH",
  path: "/apis/crawl.kubefn.dev/v1alpha1/namespaces/default/proxies/local/status",
  headers: { authorization: "Bearer kubefn-token", "content-type": "application/merge-patch+json" },
  body: '{"status":{"phase":"Ready"}}',
};

describe("isApiPath", () => {
  it.each([
    ["/api/v1/namespaces/default/secrets/x", true],
    ["/apis/crawl.kubefn.dev/v1alpha1/proxies?limit=500", true],
    ["/apis", true],
    ["/version", true],
    ["/api/v1/namespaces/default/pods?labelSelector=a%3Db", true],
    ["/", false],
    ["/metrics", false],
    ["/healthz", false],
    ["/openid/v1/jwks", false],
    ["/apis/../metrics", false],
    ["/api/v1/%2e%2e/metrics", false],
    ["/api/v1/namespaces%2fdefault", false],
    ["/api/v1/namespaces/default/services/web/proxy/admin", false],
    ["/api/v1/nodes/n1/proxy/configz", false],
    ["/api/v1/namespaces/default/pods/p/exec?command=sh", false],
    ["/api/v1/namespaces/default/pods/p/portforward", false],
    ["/api/v1/namespaces/default/pods?watch=true", false],
    ["/api/v1/namespaces/default/pods/p/log?follow=true", false],
    ["//evil.example/api", false],
  ])("%s → %s", (path, ok) => {
    expect(isApiPath(path)).toBe(ok);
  });
});

describe("admitTunnelRequest", () => {
  it("admits a signed, fresh request for the API", async () => {
    const frame = await signTunnelRequest(secret, request);
    const { verdict, request: admitted } = await admitTunnelRequest(secret, frame, now + 5);
    expect(verdict).toEqual({ ok: true });
    expect(admitted).toEqual(frame);
  });

  it.each([
    ["the path", { path: "/api/v1/namespaces/kube-system/secrets" }],
    ["the method", { method: "DELETE" }],
    ["the bearer", { headers: { ...request.headers, authorization: "Bearer someone-else" } }],
    ["the body", { body: '{"status":{"phase":"Failed"}}' }],
    ["the time", { time: now + 1 }],
  ])("refuses a request whose %s was changed after signing", async (_what, change) => {
    const frame = { ...(await signTunnelRequest(secret, request)), ...change };
    expect((await admitTunnelRequest(secret, frame, now)).verdict).toEqual({
      ok: false,
      reason: "bad-signature",
    });
  });

  it("refuses a request signed with another secret", async () => {
    const frame = await signTunnelRequest("x".repeat(32), request);
    expect((await admitTunnelRequest(secret, frame, now)).verdict).toEqual({
      ok: false,
      reason: "bad-signature",
    });
  });

  it("refuses a stale or future request", async () => {
    const frame = await signTunnelRequest(secret, request);
    for (const at of [now + TUNNEL_SKEW_SECONDS + 1, now - TUNNEL_SKEW_SECONDS - 1])
      expect((await admitTunnelRequest(secret, frame, at)).verdict).toEqual({ ok: false, reason: "stale" });
  });

  it("refuses, though signed, what is not the Kubernetes API or not a plain verb", async () => {
    const proxy = await signTunnelRequest(secret, { ...request, path: "/api/v1/nodes/n1/proxy/configz" });
    expect((await admitTunnelRequest(secret, proxy, now)).verdict).toEqual({ ok: false, reason: "not-api" });
    const connect = await signTunnelRequest(secret, { ...request, method: "CONNECT" });
    expect((await admitTunnelRequest(secret, connect, now)).verdict).toEqual({ ok: false, reason: "method" });
  });

  it.each([
    ["no signature", { ...request, type: "request" }],
    [
      "a header that does not travel",
      { ...request, type: "request", headers: { "impersonate-user": "admin" }, signature: "x" },
    ],
    ["not an object", "GET /api"],
    ["a response", { type: "response", id: "x", status: 200 }],
  ])("refuses a frame with %s", async (_what, frame) => {
    expect((await admitTunnelRequest(secret, frame, now)).verdict.ok).toBe(false);
  });
});

describe("verifyTunnelOpening", () => {
  it("accepts the relay's signed opening and refuses a forged or stale one", async () => {
    const query = await signTunnelOpening(secret, now, "n".repeat(32));
    expect(await verifyTunnelOpening(secret, query, now + 1)).toEqual({ ok: true });
    expect(await verifyTunnelOpening("x".repeat(32), query, now)).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(await verifyTunnelOpening(secret, query, now + TUNNEL_SKEW_SECONDS + 1)).toEqual({
      ok: false,
      reason: "stale",
    });
    const otherNonce = new URLSearchParams(query);
    otherNonce.set("nonce", "m".repeat(32));
    expect(await verifyTunnelOpening(secret, otherNonce, now)).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(await verifyTunnelOpening(secret, new URLSearchParams(), now)).toEqual({
      ok: false,
      reason: "unsigned",
    });
  });
});
