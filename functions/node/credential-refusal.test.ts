import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/index.ts";
import type { Transport } from "../../shared/kube/index.ts";
import { watchCredentialRefusal } from "./credential-refusal.ts";

describe("watchCredentialRefusal", () => {
  it("says a refused credential once, gauges it, and says when it is accepted again", async () => {
    const statuses = [200, 401, 401, 401, 200, 404];
    const inner: Transport = {
      request: async () => ({ status: statuses.shift() ?? 200, headers: new Headers(), body: "{}" }),
    };
    const said: string[] = [];
    const log = {
      info: (msg: string) => void said.push(`info ${msg}`),
      warn: (msg: string) => void said.push(`warn ${msg}`),
      error: (msg: string) => void said.push(`error ${msg}`),
    };
    const metrics = new PrometheusMetrics();
    const transport = watchCredentialRefusal(inner, log, metrics);
    const gauge = () => metrics.value("kubefn_api_credential_refused");
    expect(gauge()).toBe(0);
    const seen: number[] = [];
    for (let i = 0; i < 3; i++) {
      seen.push((await transport.request({ method: "GET", path: "/api" })).status);
      seen.push(gauge());
    }
    expect(seen).toEqual([200, 0, 401, 1, 401, 1]);
    for (let i = 0; i < 3; i++) await transport.request({ method: "GET", path: "/api" });
    expect(gauge()).toBe(0);
    expect(said).toEqual([
      expect.stringMatching(/^error the API server refuses kubefn's credential \(401 Unauthorized\)/),
      "info the API server accepts kubefn's credential again",
    ]);
  });
});
