import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Resources } from "../../shared/kube/index.ts";
import type { Kube, KubeObject } from "../../shared/kube/port.ts";
import type { Log } from "../../shared/runtime/index.ts";
import { relayBatchSchema } from "../../shared/runtime/intake/index.ts";
import { createRelay } from "./relay.ts";
import type { RawWatchEvent, WatchStream } from "./watch-stream.ts";

const quiet: Log = { info() {}, warn() {}, error() {} };
const cm = (name: string, rv: string): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: rv },
  data: { k: name },
});
const emptyList = { list: async () => ({ items: [], resourceVersion: "1" }) } as unknown as Kube;

/** Plays `events` on the first watch, then holds the stream open until aborted. */
function streamOf(events: RawWatchEvent[], gate?: Promise<void>): WatchStream {
  let played = false;
  return {
    async watch(_res, _rv, onEvent, signal) {
      if (!played) {
        played = true;
        await gate;
        for (const e of events) onEvent(e);
      }
      if (!signal.aborted) await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
    },
  };
}

describe("createRelay", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  async function intake(answer: (events: number) => number) {
    const batches: string[][] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const batch = relayBatchSchema.parse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        const status = answer(batch.events.length);
        if (status === 202) batches.push(batch.events.map((e) => e.object.metadata.name));
        res.writeHead(status).end();
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/events`, batches };
  }

  it("splits a batch intake refuses as too large (413) until the halves fit", async () => {
    const { url, batches } = await intake((n) => (n > 1 ? 413 : 202));
    const relay = createRelay({
      kinds: [{ resource: Resources.ConfigMap, predicate: "payload" }],
      kube: emptyList,
      stream: streamOf(["a", "b", "c"].map((n, i) => ({ type: "ADDED", object: cm(n, String(i + 2)) }))),
      intakeUrl: url,
      secret: "relay-unit-secret-0123456789",
      batch: { maxEvents: 10, maxDelayMs: 10 },
      bufferSize: 100,
      // A send that meets a connection the test server just closed is retried: at once, not in seconds.
      backoff: { baseMs: 10, maxMs: 50 },
      log: quiet,
    });
    relay.start();
    await expect.poll(() => batches.flat().length, { timeout: 10_000 }).toBe(3);
    expect(batches).toEqual([["a"], ["b"], ["c"]]);
    // The server has the last batch before the relay has its answer: counted once it has.
    await expect
      .poll(() => relay.metrics.value("kubefn_relay_delivered_events_total"), { timeout: 10_000 })
      .toBe(3);
    await relay.stop();
  });

  it("/healthz is 503 until every kind has listed, then 200", async () => {
    const { url } = await intake(() => 202);
    let release!: () => void;
    const listed = new Promise<void>((r) => (release = r));
    const kube = {
      list: async () => {
        await listed;
        return { items: [], resourceVersion: "1" };
      },
    } as unknown as Kube;
    const relay = createRelay({
      kinds: [{ resource: Resources.ConfigMap, predicate: "payload" }],
      kube,
      stream: streamOf([]),
      intakeUrl: url,
      secret: "relay-unit-secret-0123456789",
      batch: { maxEvents: 10, maxDelayMs: 10 },
      bufferSize: 100,
      log: quiet,
    });
    relay.start();
    expect((await relay.app.request("/healthz")).status).toBe(503);
    release();
    await expect
      .poll(async () => (await relay.app.request("/healthz")).status, { timeout: 10_000 })
      .toBe(200);
    const metrics = await (await relay.app.request("/metrics")).text();
    expect(metrics).toContain("kubefn_relay_objects");
    await relay.stop();
  });
});
