/**
 * One Worker, three clusters (issue 35): the Worker (wrangler.toml, in workerd through wrangler's
 * test harness, Queues and cron simulated locally) with `KUBEFN_CLUSTERS` declaring three
 * devclusters of this file's own, each reached through its plain-HTTP loopback pass-through with
 * its own kubefn ServiceAccount token, each with its own audit token and relay secret.
 *
 * - a Proxy, a SubPool and a Site in each cluster reach Ready from the one Worker's cron sweeps
 *   and queue consumer, each cluster's passes named on their log lines;
 * - intake knows a batch's cluster by its credential: a relay batch signed with east's secret,
 *   naming west's Proxy, is refused; so is east's audit token asking for west;
 * - east's API server stopped and west's credential revoked (its ServiceAccount deleted): north
 *   keeps converging new objects, its sweeps running beside east's held-back one and west's
 *   refused one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { signBatch } from "../../shared/app/intake/index.ts";
import { Resources } from "../../shared/kube/index.ts";
import { eventually } from "../e2e/host.ts";
import { allReady, type FleetCluster, fleetObjects, startFleetClusters } from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import type { OwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const root = new URL("../../", import.meta.url).pathname;
const names = ["east", "west", "north"] as const;
type Name = (typeof names)[number];

const clusters = {} as Record<Name, FleetCluster>;
const devclusters: OwnDevcluster[] = [];
const secrets = Object.fromEntries(
  names.map((n) => [n, { auditToken: crypto.randomUUID(), relaySecret: crypto.randomUUID() }]),
) as Record<Name, { auditToken: string; relaySecret: string }>;
let harness: TestHarness | undefined;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
let cron: { stop(): Promise<void> } | undefined;

const objects = (suffix: string) =>
  fleetObjects(suffix, { forwardProxyPort: forwardProxy!.port, targetPort: target!.port });

/** The Worker's cron, run every 2 s (one run at a time), as the platform runs it every minute. */
function runCron(worker: TestHarness): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await worker.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
      await new Promise((r) => setTimeout(r, 2000));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** The Worker's own JSON log lines, as the harness captured them. */
function workerLines(): Array<{ msg?: string; cluster?: string } & Record<string, unknown>> {
  return (harness?.getLogs() ?? []).flatMap((l) => {
    try {
      return [JSON.parse(l.message) as { msg?: string; cluster?: string }];
    } catch {
      return [];
    }
  });
}

beforeAll(async () => {
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  const started = await startFleetClusters(names, ({ devcluster }) => devclusters.push(devcluster));
  for (const c of started) clusters[c.name as Name] = c;
  // Workers trust public roots only: each API server through its devcluster's loopback pass-through.
  const declared = started.map((c) => ({
    name: c.name,
    server: c.devcluster.httpProxy,
    credential: { kind: "token", token: c.token },
    ...secrets[c.name as Name],
  }));
  harness = createTestHarness({
    root,
    workers: [
      {
        configPath: "wrangler.toml",
        // Drift lists at every cron run (resync 60), so one run finds a new object.
        vars: {
          PROXY_RESYNC_SECONDS: "60",
          PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
          // A stopped API server opens its cluster's circuit after two failures.
          CIRCUIT_FAILURES: "2",
          KUBE_TIMEOUT_SECONDS: "5",
        },
        secrets: { KUBEFN_CLUSTERS: JSON.stringify(declared), STATUS_SEAL_KEY: crypto.randomUUID() },
      },
    ],
  });
  await harness.listen();
  cron = runCron(harness);
}, 300_000);

afterAll(async () => {
  await cron?.stop();
  await harness?.close();
  await Promise.all(devclusters.map((d) => d.close()));
  await Promise.all([forwardProxy?.close(), target?.close()]);
}, 120_000);

/** A relay batch announcing `cluster`'s Proxy `name`, signed with `secret`, to `?cluster=asked`. */
async function relayBatch(secret: string, asked: Name, name: string): Promise<{ status: number }> {
  const body = JSON.stringify({
    kind: "RelayBatch",
    apiVersion: "kubefn.dev/v1",
    events: [
      {
        type: "ADDED",
        resource: { group: "crawl.kubefn.dev", version: "v1alpha1", resource: "proxies" },
        object: { metadata: { namespace: "default", name, uid: crypto.randomUUID(), generation: 1 } },
      },
    ],
  });
  return harness!.fetch(`/v1/events?cluster=${asked}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(await signBatch(secret, body, Date.now() / 1000)) },
    body,
  });
}

describe("one Worker, three clusters", () => {
  it("a Proxy, a SubPool and a Site in each cluster reach Ready", async () => {
    for (const name of names) {
      for (const [res, o] of objects("")) await clusters[name].admin.create(res, o);
    }
    await Promise.all(names.map((name) => allReady(clusters[name], objects(""))));
    // Each cluster's own passes, named on its log lines.
    for (const name of names) {
      expect(workerLines().some((l) => l.msg === "pass" && l.cluster === name)).toBe(true);
    }
  }, 300_000);

  it("intake knows a batch's cluster by its credential: east's secret or token cannot deliver west's events", async () => {
    const refused = await relayBatch(secrets.east.relaySecret, "west", "edge");
    expect(refused.status).toBe(401);
    const token = await harness!.fetch("/v1/events?cluster=west", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${secrets.east.auditToken}` },
      body: JSON.stringify({ kind: "EventList", apiVersion: "audit.k8s.io/v1", items: [] }),
    });
    expect(token.status).toBe(401);
    // West's own secret delivers west's events; east's its own.
    expect((await relayBatch(secrets.west.relaySecret, "west", "edge")).status).toBe(202);
    expect((await relayBatch(secrets.east.relaySecret, "east", "edge")).status).toBe(202);
  }, 60_000);

  it("east's API server stopped and west's credential revoked: north keeps converging, beside east's and west's failing sweeps", async () => {
    await clusters.east.devcluster.close();
    // West's kubefn ServiceAccount deleted: its bound token is refused from now on.
    await clusters.west.admin.delete(Resources.ServiceAccount, {
      namespace: "kubefn-system",
      name: "kubefn",
    });
    const revokedFrom = workerLines().length;
    for (const [res, o] of objects("-2")) await clusters.north.admin.create(res, o);
    await allReady(clusters.north, objects("-2"));
    await eventually(
      "east's sweep held back by its circuit",
      async () =>
        workerLines().some((l) => l.cluster === "east" && /sweep held back/.test(String(l.msg)))
          ? true
          : undefined,
      60_000,
    );
    // West's requests are refused (401), said on west's lines; north's passes went on meanwhile.
    await eventually(
      "west's refused credential on its lines",
      async () =>
        workerLines()
          .slice(revokedFrom)
          .some((l) => l.cluster === "west" && /\b401\b|Unauthorized/.test(JSON.stringify(l)))
          ? true
          : undefined,
      60_000,
    );
    expect(
      workerLines()
        .slice(revokedFrom)
        .some((l) => l.msg === "pass" && l.cluster === "north"),
    ).toBe(true);
  }, 300_000);
});
