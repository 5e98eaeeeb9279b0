import { readFileSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono/tiny";
import type { Kubefn, PrometheusMetrics } from "../../shared/app/index.ts";
import type { ApiGuard, ApiGuardStats } from "../../shared/kube/index.ts";
import { recordProcessMetrics } from "./process-metrics.ts";
import type { WorkQueue } from "./work-queue.ts";

/**
 * The Node host's `/metrics` body: the pass metrics, the queue (client-go's `workqueue_depth` per
 * controller, kubefn's ready/running/delayed), the API guard (circuit state; its counts as
 * counters) and the process, all read at scrape time.
 */
export function renderHostMetrics(
  metrics: PrometheusMetrics,
  queue: Pick<WorkQueue, "stats" | "depthByName">,
  guard: ApiGuardStats,
): string {
  recordQueueAndGuard(metrics, queue, guard, {});
  recordProcessMetrics(metrics);
  return metrics.render();
}

/** One queue's and one API guard's series, with `labels` (a declared cluster's `cluster`). */
function recordQueueAndGuard(
  metrics: PrometheusMetrics,
  queue: Pick<WorkQueue, "stats" | "depthByName">,
  guard: ApiGuardStats,
  labels: Record<string, string>,
): void {
  const stats = queue.stats();
  metrics.gauge("kubefn_queue_ready", stats.ready, labels);
  metrics.gauge("kubefn_queue_running", stats.running, labels);
  metrics.gauge("kubefn_queue_delayed", stats.delayed, labels);
  for (const [name, n] of queue.depthByName()) metrics.gauge("workqueue_depth", n, { name, ...labels });
  metrics.gauge("kubefn_api_circuit_open", guard.state === "closed" ? 0 : 1, labels);
  metrics.setTotal("kubefn_api_circuit_opened_total", guard.opened, labels);
  metrics.setTotal("kubefn_api_requests_held_back_total", guard.heldBack, labels);
  metrics.setTotal("kubefn_api_requests_over_budget_total", guard.overBudget, labels);
  metrics.setTotal("kubefn_api_requests_retried_total", guard.retried, labels);
}

/**
 * How long one request may take to arrive, headers and body together, before the server answers
 * 408 and closes its connection: intake's own body deadline (30 s) counts from the checked
 * headers, this from the connection's first byte, so a sender that dribbles its headers (a
 * slow-loris) is cut off too. Node's default is 300 s, checked every 30 s.
 */
export const defaultRequestTimeoutMs = 30_000;

/**
 * Serves `fetch` on host:port (0: any free port), over HTTPS when `tls` names a certificate and
 * key (read once, at start), and resolves once it listens. Each request must arrive whole within
 * `requestTimeoutMs` ({@link defaultRequestTimeoutMs}).
 */
export async function listen(
  fetch: (request: Request) => Response | Promise<Response>,
  port: number,
  hostname: string,
  tls?: { certFile: string; keyFile: string },
  opts: { requestTimeoutMs?: number } = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const requestTimeout = opts.requestTimeoutMs ?? defaultRequestTimeoutMs;
  const deadlines = {
    requestTimeout,
    headersTimeout: requestTimeout,
    // How often Node looks for connections past their deadline: a tenth of it, at most a second.
    connectionsCheckingInterval: Math.min(1000, Math.ceil(requestTimeout / 10)),
  };
  const server = tls
    ? serve({
        fetch,
        port,
        hostname,
        createServer: createHttpsServer,
        serverOptions: { ...deadlines, cert: readFileSync(tls.certFile), key: readFileSync(tls.keyFile) },
      })
    : serve({ fetch, port, hostname, serverOptions: deadlines });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", () => resolve());
    server.once("error", reject);
  });
  return {
    url: `${tls ? "https" : "http"}://${hostname}:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What the host's routes serve from once it is wired; until then `/metrics` and intake answer 503. */
export type HostParts =
  | { kubefn: Pick<Kubefn, "fetch">; queue: WorkQueue; guard: ApiGuard; clusters?: undefined }
  | {
      kubefn: Pick<Kubefn, "fetch">;
      /** A fleet's clusters (declared and discovered), as they are now: each one's queue and guard. */
      readonly clusters: readonly { cluster: string; queue: WorkQueue; guard: ApiGuard }[];
    };

/**
 * `/metrics` (Prometheus text) and everything else to {@link Kubefn.fetch}; `early` (the OIDC
 * issuer's documents) is served from the start, before the host has connected to its cluster:
 * the API server must fetch the keys before it accepts the host's first token.
 */
export function hostApp(
  metrics: PrometheusMetrics,
  parts: () => HostParts | undefined,
  early?: Hono,
  opts: { metrics: boolean } = { metrics: true },
): Hono {
  const http = new Hono();
  if (early) http.route("/", early);
  if (opts.metrics) http.route("/", metricsApp(metrics, parts));
  http.all("*", (c) => parts()?.kubefn.fetch(c.req.raw) ?? c.json({ error: "starting" }, 503));
  return http;
}

/**
 * `/metrics` alone, for a listener of its own (`KUBEFN_METRICS_PORT`): a port a NetworkPolicy
 * can admit the scraper to and nobody else, apart from intake's and the crawler API's.
 */
export function metricsApp(metrics: PrometheusMetrics, parts: () => HostParts | undefined): Hono {
  const http = new Hono();
  http.get("/metrics", (c) => {
    const p = parts();
    if (!p) return c.json({ error: "starting" }, 503);
    let body: string;
    if (p.clusters) {
      for (const c of p.clusters)
        recordQueueAndGuard(metrics, c.queue, c.guard.stats(), { cluster: c.cluster });
      recordProcessMetrics(metrics);
      body = metrics.render();
    } else body = renderHostMetrics(metrics, p.queue, p.guard.stats());
    return c.text(body, 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
  });
  return http;
}
