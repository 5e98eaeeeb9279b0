/**
 * kubefn under chaos: the Node host as a child process (test/e2e/host.ts), with a kubeconfig for
 * the least-privileged ServiceAccount that points at the fault proxy instead of the API server;
 * or the Worker in workerd (wrangler's test harness), configured the same way.
 */

import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createTestHarness, type TestHarness } from "wrangler";
import { type HostProcess, type StandbyHost, startHost } from "../e2e/host.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import type { Driver } from "./scenario.ts";

/**
 * A kubeconfig for `kubefn-system/kubefn` whose server is `server` (plain HTTP, e.g. the fault
 * proxy; client-node wants insecure-skip-tls-verify for an http:// server). Installs the CRDs and
 * RBAC on the way.
 */
/** Environment of a Node host under chaos: quick sweeps, a 2 s client deadline. */
export function chaosHostEnv(kubeconfig: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    KUBECONFIG: kubeconfig,
    KUBEFN_SWEEP_SECONDS: "2",
    KUBEFN_PROXY_RESYNC_SECONDS: "60",
    KUBEFN_KUBE_TIMEOUT_SECONDS: "2",
    KUBEFN_CONCURRENCY: "8",
    ...extra,
  };
}

/** Starts a Node host under chaos with `env`, or the `standby` spawned with it (`spawnStandbyHost`). */
export async function startChaosHost(
  env: Record<string, string>,
  standby?: StandbyHost,
): Promise<{ host: HostProcess; driver: Driver }> {
  const host = standby ? await standby.start() : await startHost(env);
  return {
    host,
    driver: {
      passes: () => host.lines.filter((l) => l.msg === "pass").length,
      linesAbout: (name, limit = 12) =>
        host.lines
          .map((l) => JSON.stringify(l))
          .filter((l) => l.includes(name))
          .slice(-limit),
    },
  };
}

/** How often a Worker driver's `tick` runs the cron sweep at most; during a teardown, every second. */
export const WORKER_CRON_MS = 3000;
const WORKER_TEARDOWN_CRON_MS = 1000;

/**
 * The Worker (wrangler.toml) in workerd through wrangler's test harness (Queues and cron
 * simulated locally), reaching the API server at `kubeServer` (e.g. the fault proxy) with
 * `kubeToken`, resync 60 s and a 2 s client deadline. Its driver counts `pass` log lines and runs
 * the cron sweep on `tick`, at most every {@link WORKER_CRON_MS} (every second in a teardown).
 */
export async function startChaosWorker(opts: {
  kubeServer: string;
  kubeToken: string;
  auditToken: string;
}): Promise<{ harness: TestHarness; url: string; driver: Driver }> {
  const harness = createTestHarness({
    root: new URL("../../", import.meta.url).pathname,
    workers: [
      {
        configPath: "wrangler.toml",
        vars: {
          KUBE_SERVER: opts.kubeServer,
          PROXY_RESYNC_SECONDS: "60",
          KUBE_TIMEOUT_SECONDS: "2",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
        },
        secrets: {
          KUBE_TOKEN: opts.kubeToken,
          AUDIT_TOKEN: opts.auditToken,
          STATUS_SEAL_KEY: crypto.randomUUID(),
        },
      },
    ],
  });
  const { url } = await harness.listen();
  let lastSweep = 0;
  const driver: Driver = {
    passes: () =>
      harness.getLogs().filter((l) => {
        try {
          return (JSON.parse(l.message) as { msg?: string }).msg === "pass";
        } catch {
          return false;
        }
      }).length,
    linesAbout: (name, limit = 12) =>
      harness
        .getLogs()
        .map((l) => l.message)
        .filter((m) => m.includes(name))
        .slice(-limit),
    async tick(opts) {
      if (Date.now() - lastSweep < (opts?.teardown ? WORKER_TEARDOWN_CRON_MS : WORKER_CRON_MS)) return;
      lastSweep = Date.now();
      await harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
    },
  };
  return { harness, url: url.origin, driver };
}

/**
 * The API server's audit webhook for a host that is killed and restarted: audit events are
 * posted to the host running now (`target()`, undefined while none runs: those events are lost,
 * as they are when a host is down; the sweep covers them). Two sources: the test setup's audit
 * collector, polled (`pollCollector`), or the API server posting here directly (`url`, for a
 * devcluster started with `--audit-webhook-url` = `url` and `--audit-webhook-token` = `token`).
 */
export interface AuditRelay {
  url: string;
  token: string;
  /** Polls the test setup's collector (`GET /events?since=`) from now on, every 500 ms. */
  pollCollector(collector: string): Promise<void>;
  close(): Promise<void>;
}

export async function startAuditRelay(
  target: () => { url: string; auditToken: string } | undefined,
): Promise<AuditRelay> {
  const token = randomBytes(16).toString("hex");
  const deliver = async (items: unknown[]) => {
    const host = target();
    if (!host || items.length === 0) return;
    await fetch(`${host.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${host.auditToken}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items }),
    }).catch(() => undefined);
  };
  const server = createServer((req, res) => {
    if (req.method !== "POST" || req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(req.method === "POST" ? 401 : 405).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200).end();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { items?: unknown[] };
        void deliver(Array.isArray(body.items) ? body.items : []);
      } catch {}
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  return {
    url: `http://127.0.0.1:${port}/audit`,
    token,
    async pollCollector(collector) {
      const read = async (since: number) =>
        (await (await fetch(`${collector}/events?since=${since}`)).json()) as {
          events: unknown[];
          next: number;
        };
      let cursor = (await read(0)).next;
      const poll = async () => {
        try {
          const { events, next } = await read(cursor);
          cursor = next;
          await deliver(events);
        } catch {}
        if (!closed) timer = setTimeout(poll, 500);
      };
      timer = setTimeout(poll, 500);
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
