import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBatch } from "../../shared/auth/index.ts";
import type { Log, RelayEvent } from "../../shared/runtime/index.ts";
import { relayBatchSchema } from "../../shared/runtime/intake/index.ts";
import { backoffDelay, createSender, retryAfterMs, verdictFor } from "./sender.ts";

const secret = "relay-test-secret-0123456789";
const quiet: Log = { info() {}, warn() {}, error() {} };

describe("verdictFor", () => {
  it.each([
    [200, "delivered"],
    [202, "delivered"],
    [400, "rejected"],
    [401, "rejected"],
    [403, "rejected"],
    [404, "rejected"],
    // A replay: the batch was accepted on an earlier attempt whose answer was lost.
    [409, "delivered"],
    [408, "retry"],
    [413, "tooLarge"],
    [425, "retry"],
    [429, "retry"],
    [500, "retry"],
    [502, "retry"],
    [503, "retry"],
    [504, "retry"],
  ] as const)("%i → %s", (status, verdict) => {
    expect(verdictFor(status)).toBe(verdict);
  });
});

describe("backoffDelay", () => {
  const backoff = { baseMs: 500, maxMs: 30_000 };
  it.each([
    [1, 0, 250],
    [1, 1, 500],
    [2, 0, 500],
    [2, 1, 1000],
    [3, 0.5, 1500],
    [7, 1, 30_000],
    [8, 0, 15_000],
    [50, 1, 30_000],
  ])("retry %i with random %f → %i ms", (attempt, random, expected) => {
    expect(backoffDelay(attempt, random, backoff)).toBe(expected);
  });
});

describe("retryAfterMs", () => {
  it.each([
    ["3", 3000],
    [" 0 ", 0],
    ["Wed, 21 Oct 2015 07:28:00 GMT", undefined],
    [null, undefined],
  ] as const)("%s → %s", (header, expected) => {
    expect(retryAfterMs(header)).toBe(expected);
  });
});

interface Received {
  body: string;
  headers: IncomingHttpHeaders;
}

/** A local intake on 127.0.0.1 answering from `statuses` in turn, then 202. */
async function startIntake(statuses: number[], extraHeaders: Record<string, string> = {}) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
      const status = statuses.shift() ?? 202;
      res.writeHead(status, { "content-type": "application/json", ...(status === 202 ? {} : extraHeaders) });
      res.end(JSON.stringify(status === 202 ? { accepted: true } : { error: `status ${status}` }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v1/events`, received, server };
}

const events: RelayEvent[] = [
  {
    type: "MODIFIED",
    resource: { group: "", version: "v1", resource: "configmaps" },
    object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "ns", uid: "u" } },
  },
];

describe("createSender against a local intake", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  const make = (url: string, metrics = new PrometheusMetrics(), delays: number[] = []) =>
    createSender({
      url,
      secret,
      log: quiet,
      metrics,
      backoff: { baseMs: 10, maxMs: 40 },
      random: () => 0.5,
      sleep: async (ms) => {
        delays.push(ms);
        await new Promise((r) => setTimeout(r, ms));
      },
    });

  it("retries 503, 500 and 429 with growing delays, then delivers a verifiable RelayBatch", async () => {
    const intake = await startIntake([503, 500, 429, 503]);
    servers.push(intake.server);
    const metrics = new PrometheusMetrics();
    const delays: number[] = [];
    const result = await make(intake.url, metrics, delays)(events);
    expect(result).toEqual({ outcome: "delivered", attempts: 5 });
    expect(delays).toEqual([8, 15, 30, 30]); // capped at 40 ms, equal jitter
    expect(intake.received).toHaveLength(5);
    const last = intake.received.at(-1)!;
    const verdict = await verifyBatch(
      secret,
      last.body,
      {
        signature: last.headers[SIGNATURE_HEADER] as string,
        timestamp: last.headers[TIMESTAMP_HEADER] as string,
      },
      Date.now() / 1000,
      300,
    );
    expect(verdict).toEqual({ ok: true });
    expect(relayBatchSchema.parse(JSON.parse(last.body))).toEqual({
      kind: "RelayBatch",
      apiVersion: "kubefn.dev/v1",
      events,
    });
    expect(metrics.value("kubefn_relay_send_attempts_total", { result: "503" })).toBe(2);
    expect(metrics.value("kubefn_relay_batches_total", { outcome: "delivered" })).toBe(1);
  });

  it("a signature made with another secret does not verify", async () => {
    const intake = await startIntake([]);
    servers.push(intake.server);
    await make(intake.url)(events);
    const [req] = intake.received;
    const verdict = await verifyBatch(
      "another-secret-entirely",
      req!.body,
      {
        signature: req!.headers[SIGNATURE_HEADER] as string,
        timestamp: req!.headers[TIMESTAMP_HEADER] as string,
      },
      Date.now() / 1000,
      300,
    );
    expect(verdict).toEqual({ ok: false, reason: "BadSignature" });
  });

  it.each([400, 401, 404])("gives up at once on %i and counts it", async (status) => {
    const intake = await startIntake([status]);
    servers.push(intake.server);
    const metrics = new PrometheusMetrics();
    const result = await make(intake.url, metrics)(events);
    expect(result).toMatchObject({ outcome: "rejected", attempts: 1, status });
    expect(intake.received).toHaveLength(1);
    expect(metrics.value("kubefn_relay_batches_total", { outcome: "rejected" })).toBe(1);
  });

  it("reports 413 as tooLarge without retrying", async () => {
    const intake = await startIntake([413]);
    servers.push(intake.server);
    expect(await make(intake.url)(events)).toEqual({ outcome: "tooLarge", attempts: 1 });
  });

  it("honours Retry-After up to the backoff cap", async () => {
    const intake = await startIntake([429], { "retry-after": "1" });
    servers.push(intake.server);
    const delays: number[] = [];
    await make(intake.url, new PrometheusMetrics(), delays)(events);
    expect(delays).toEqual([40]);
  });

  it("retries network errors (nothing listening) until intake comes up", async () => {
    const probe = await startIntake([]);
    const url = probe.url;
    const port = (probe.server.address() as AddressInfo).port;
    await new Promise((r) => probe.server.close(r));
    const received: string[] = [];
    const delays: number[] = [];
    const sending = createSender({
      url,
      secret,
      log: quiet,
      metrics: new PrometheusMetrics(),
      backoff: { baseMs: 20, maxMs: 50 },
      random: () => 0,
      sleep: async (ms) => {
        delays.push(ms);
        if (delays.length === 3) {
          const server = createServer((req, res) => {
            req.resume();
            req.on("end", () => {
              received.push(req.url ?? "");
              res.writeHead(202).end();
            });
          });
          servers.push(server);
          await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
        }
        await new Promise((r) => setTimeout(r, ms));
      },
    })(events);
    const result = await sending;
    expect(result).toEqual({ outcome: "delivered", attempts: 4 });
    expect(received).toEqual(["/v1/events"]);
  });

  it("an abort during the wait resolves aborted", async () => {
    const intake = await startIntake([503, 503, 503]);
    servers.push(intake.server);
    const stop = new AbortController();
    const send = createSender({
      url: intake.url,
      secret,
      log: quiet,
      metrics: new PrometheusMetrics(),
      backoff: { baseMs: 60_000, maxMs: 60_000 },
      signal: stop.signal,
    });
    const pending = send(events);
    setTimeout(() => stop.abort(), 50);
    expect((await pending).outcome).toBe("aborted");
  });
});
