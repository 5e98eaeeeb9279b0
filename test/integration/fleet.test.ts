/**
 * One Node host, three clusters (issue 35): three devclusters of this file's own, declared in
 * `KUBEFN_CLUSTERS`, each reached as its own kubefn ServiceAccount (two by a kubeconfig, one by
 * a bare token with its server and CA). A Proxy, a SubPool and a Site
 * in each reach Ready from the one host; then one cluster's API server is stopped and the other
 * two keep converging, each with its own circuit, queue and sweep.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import { eventually } from "../e2e/host.ts";
import {
  allReady as clusterReady,
  type FleetCluster,
  fleetObjects,
  startFleetClusters,
} from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import type { OwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const names = ["east", "west", "north"] as const;
type Name = (typeof names)[number];

const clusters = {} as Record<Name, FleetCluster>;
const devclusters: OwnDevcluster[] = [];
let host: NodeHost | undefined;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];

const objects = (suffix: string) =>
  fleetObjects(suffix, { forwardProxyPort: forwardProxy!.port, targetPort: target!.port });

const allReady = (name: Name, suffix: string) => clusterReady(clusters[name], objects(suffix));

beforeAll(async () => {
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  const started = await startFleetClusters(names, ({ devcluster }) => devclusters.push(devcluster));
  for (const c of started) clusters[c.name as Name] = c;
  const declared = started.map((c) =>
    c.name !== "west"
      ? { name: c.name, credential: { kind: "kubeconfig", file: c.kubeconfig } }
      : // West by a bare token, its server and its CA: the kubeconfig's, taken apart.
        { name: c.name, server: c.server, ca: c.ca, credential: { kind: "token", token: c.token } },
  );
  const config = parseNodeHostEnv({
    KUBEFN_CLUSTERS: JSON.stringify(declared),
    KUBEFN_PORT: "0",
    KUBEFN_SWEEP_SECONDS: "1",
    KUBEFN_MIN_REPORT_SECONDS: "1",
    ADMISSION_RECHECK_SECONDS: "2",
    // A stopped API server opens its cluster's circuit after two failures, for two seconds.
    CIRCUIT_FAILURES: "2",
    CIRCUIT_OPEN_SECONDS: "2",
    KUBE_TIMEOUT_SECONDS: "5",
    PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
  });
  const record = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  host = await startNodeHost(config, { info: record("info"), warn: record("warn"), error: record("error") });
}, 300_000);

afterAll(async () => {
  await host?.stop();
  await Promise.all(devclusters.map((d) => d.close()));
  await Promise.all([forwardProxy?.close(), target?.close()]);
}, 120_000);

describe("one Node host, three clusters", () => {
  it("a Proxy, a SubPool and a Site in each cluster reach Ready", async () => {
    for (const name of names) {
      for (const [res, o] of objects("")) await clusters[name].admin.create(res, o);
    }
    await Promise.all(names.map((name) => allReady(name, "")));
    // Each cluster's own passes, named on its log lines and in its series, never another's.
    for (const name of names) {
      expect(lines.some((l) => l.msg === "pass" && l.fields?.cluster === name)).toBe(true);
    }
    const text = host!.metrics.render().split("\n");
    for (const name of names) {
      const succeeded = text.filter(
        (l) =>
          l.startsWith("controller_runtime_reconcile_total{") &&
          l.includes('result="success"') &&
          l.includes(`cluster="${name}"`),
      );
      expect(succeeded.length).toBeGreaterThan(0);
    }
  }, 300_000);

  it("one API server stopped, the other clusters keep converging; its circuit opens alone", async () => {
    await clusters.east.devcluster.close();
    for (const name of ["west", "north"] as const) {
      for (const [res, o] of objects("-2")) await clusters[name].admin.create(res, o);
    }
    await Promise.all((["west", "north"] as const).map((name) => allReady(name, "-2")));
    await eventually(
      "east's circuit opened, and only east's",
      async () => {
        const text = (await fetch(`${host!.url}/metrics`).then((r) => r.text())).split("\n");
        const open = (cluster: string) =>
          text.find(
            (l) => l.startsWith("kubefn_api_circuit_opened_total{") && l.includes(`cluster="${cluster}"`),
          );
        return open("east") &&
          !open("east")?.endsWith(" 0") &&
          open("west")?.endsWith(" 0") &&
          open("north")?.endsWith(" 0")
          ? true
          : undefined;
      },
      120_000,
    );
  }, 300_000);
});
