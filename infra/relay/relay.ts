import { Hono } from "hono";
import { PrometheusMetrics } from "../../shared/app/telemetry/index.ts";
import type { Kube } from "../../shared/kube/index.ts";
import type { Log, RelayEvent } from "../../shared/runtime/index.ts";
import { Batcher, type BatchRules } from "./batcher.ts";
import { CoalescingBuffer } from "./buffer.ts";
import type { RelayKind } from "./kinds.ts";
import { type Backoff, createSender, type SendResult } from "./sender.ts";
import type { WatchStream } from "./watch-stream.ts";
import { KindWatcher } from "./watcher.ts";

export interface RelayOptions {
  kinds: readonly RelayKind[];
  kube: Kube;
  stream: WatchStream;
  intakeUrl: string;
  secret: string;
  batch: BatchRules;
  /** Most events held while intake is slow or down; the oldest is dropped beyond it. */
  bufferSize: number;
  log: Log;
  metrics?: PrometheusMetrics;
  backoff?: Backoff;
  /** `/healthz` fails once list/watch of some kind has failed without a break this long. Default 5 min. */
  unhealthyAfterMs?: number;
  /** Emit ADDED for every object of the first list (default false). */
  emitInitial?: boolean;
  fetch?: typeof fetch;
}

export interface Relay {
  readonly watchers: readonly KindWatcher[];
  readonly metrics: PrometheusMetrics;
  /** `/healthz` and `/metrics`. */
  readonly app: Hono;
  /** Starts every watcher; resolves at once. `startFrom` (tests) resumes watches without a first list. */
  start(startFrom?: string): void;
  /** Every watcher has listed once. */
  synced(): boolean;
  /** Resolves when the buffer is empty and no batch is in flight. */
  drained(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The relay: one {@link KindWatcher} per kind → a bounded {@link CoalescingBuffer} → a
 * {@link Batcher} → the signing sender. Exposes `/healthz` (200 once every kind is listed and no
 * kind has been failing for `unhealthyAfterMs`) and `/metrics` (Prometheus text).
 *
 * A batch over intake's size cap (413) is split in halves and each half sent; a single event
 * still too large is dropped and counted.
 *
 * @example
 * const relay = createRelay({ kinds: relayKindsFor(registry), kube, stream: clientNodeWatchStream(kc),
 *   intakeUrl, secret, batch: { maxEvents: 100, maxDelayMs: 1000 }, bufferSize: 10_000, log });
 * relay.start();
 * serve({ fetch: relay.app.fetch, port: 8080 });
 */
export function createRelay(opts: RelayOptions): Relay {
  const metrics = opts.metrics ?? new PrometheusMetrics();
  const stopping = new AbortController();
  const buffer = new CoalescingBuffer(opts.bufferSize, () =>
    metrics.count("kubefn_relay_dropped_total", { reason: "buffer_full" }),
  );
  const send = createSender({
    url: opts.intakeUrl,
    secret: opts.secret,
    log: opts.log,
    metrics,
    signal: stopping.signal,
    ...(opts.backoff ? { backoff: opts.backoff } : {}),
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });

  const deliver = async (events: RelayEvent[]): Promise<void> => {
    const started = performance.now();
    const result: SendResult = await send(events);
    metrics.observe("kubefn_relay_send_seconds", (performance.now() - started) / 1000);
    if (result.outcome === "delivered")
      metrics.count("kubefn_relay_delivered_events_total", {}, events.length);
    else if (result.outcome === "rejected")
      metrics.count("kubefn_relay_dropped_total", { reason: "rejected" }, events.length);
    else if (result.outcome === "tooLarge") {
      if (events.length === 1) {
        opts.log.error("relay event larger than intake's cap; dropped", {
          name: events[0]?.object.metadata.name,
        });
        metrics.count("kubefn_relay_dropped_total", { reason: "too_large" });
        return;
      }
      const half = Math.ceil(events.length / 2);
      await deliver(events.slice(0, half));
      await deliver(events.slice(half));
    }
  };

  const batcher = new Batcher(buffer, opts.batch, deliver, (err) =>
    opts.log.error("relay delivery failed", { error: String(err) }),
  );

  const watchers = opts.kinds.map(
    (kind) =>
      new KindWatcher({
        kind,
        kube: opts.kube,
        stream: opts.stream,
        log: opts.log,
        metrics,
        emitInitial: opts.emitInitial ?? false,
        emit: (event) => {
          buffer.put(event);
          metrics.gauge("kubefn_relay_buffered_events", buffer.size);
          batcher.notify();
        },
      }),
  );
  const runs: Promise<void>[] = [];
  const unhealthyAfterMs = opts.unhealthyAfterMs ?? 5 * 60_000;

  const app = new Hono();
  app.get("/healthz", (c) => {
    const now = Date.now();
    const kinds = watchers.map((w) => ({
      resource: w.resource,
      synced: w.synced,
      resourceVersion: w.resourceVersion ?? null,
      failingForMs: w.failingSince === undefined ? 0 : now - w.failingSince,
    }));
    const healthy = kinds.every((k) => k.synced && k.failingForMs < unhealthyAfterMs);
    return c.json({ ok: healthy, buffered: buffer.size, sending: batcher.busy, kinds }, healthy ? 200 : 503);
  });
  app.get("/metrics", (c) => {
    metrics.gauge("kubefn_relay_buffered_events", buffer.size);
    return c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });

  return {
    watchers,
    metrics,
    app,
    start(startFrom) {
      for (const watcher of watchers) runs.push(watcher.run(stopping.signal, startFrom));
    },
    synced: () => watchers.every((w) => w.synced),
    async drained() {
      while (buffer.size > 0 || batcher.busy) {
        await batcher.idle();
        if (buffer.size > 0) await new Promise((r) => setTimeout(r, 20));
      }
    },
    async stop() {
      stopping.abort();
      await Promise.all(runs);
      await batcher.stop();
    },
  };
}
