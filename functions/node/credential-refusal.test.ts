import { describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/index.ts";
import type { Transport } from "../../shared/kube/index.ts";
import { watchCredentialRefusal } from "./credential-refusal.ts";

/** A transport answering `answers` ([status, at ms]) in turn, the watch's clock at each `at`. */
function watched(answers: [number, number][]) {
  let clock = 0;
  const inner: Transport = {
    request: async () => {
      const [status, at] = answers.shift() ?? [200, clock];
      clock = at;
      return { status, headers: new Headers(), body: "{}" };
    },
  };
  const said: string[] = [];
  const log = {
    info: (msg: string) => void said.push(`info ${msg}`),
    warn: (msg: string) => void said.push(`warn ${msg}`),
    error: (msg: string) => void said.push(`error ${msg}`),
  };
  const metrics = new PrometheusMetrics();
  const transport = watchCredentialRefusal(inner, log, metrics, { refusedAfterMs: 10_000, now: () => clock });
  const gauges: number[] = [];
  return {
    said,
    gauges,
    gauge: () => metrics.value("kubefn_api_credential_refused"),
    async send(n: number) {
      for (let i = 0; i < n; i++) {
        await transport.request({ method: "GET", path: "/api" });
        gauges.push(metrics.value("kubefn_api_credential_refused") ?? -1);
      }
    },
  };
}

describe("watchCredentialRefusal", () => {
  it("says a credential refused for 10 s once, gauges it, and says when it is accepted again", async () => {
    const w = watched([
      [200, 0],
      [401, 1_000],
      [401, 6_000],
      [401, 11_000],
      [401, 20_000],
      [200, 21_000],
      [404, 22_000],
    ]);
    expect(w.gauge()).toBe(0);
    await w.send(7);
    expect(w.gauges).toEqual([0, 0, 0, 1, 1, 0, 0]);
    expect(w.said).toEqual([
      expect.stringMatching(/^error the API server refuses kubefn's credential \(401 Unauthorized\)/),
      "info the API server accepts kubefn's credential again",
    ]);
  });

  it("says nothing of 401s that end within 10 s (an API server still fetching kubefn's issuer's keys)", async () => {
    const w = watched([
      [401, 0],
      [401, 4_000],
      [401, 9_000],
      [200, 9_500],
      [401, 15_000],
      [200, 16_000],
    ]);
    await w.send(6);
    expect(w.gauges).toEqual([0, 0, 0, 0, 0, 0]);
    expect(w.said).toEqual([]);
  });
});
