/**
 * One Node host, three clusters (issue 35): three devclusters of this file's own, declared in
 * `KUBEFN_CLUSTERS`, each reached as its own kubefn ServiceAccount (two by a kubeconfig, one by
 * a bare token with its server and CA). A Proxy, a SubPool and a Site
 * in each reach Ready from the one host; then one cluster's API server is stopped and the other
 * two keep converging, each with its own circuit, queue and sweep.
 */

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { siteResource } from "../../shared/controllers/site/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import type { KubeObject, Resource } from "../../shared/kube/index.ts";
import { eventually } from "../e2e/host.ts";
import {
  declarationOf,
  externalProxy,
  type FleetTestCluster,
  readyOf,
  startFleetCluster,
} from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const names = ["east", "west", "north"] as const;
type Name = (typeof names)[number];

const clusters = {} as Record<Name, FleetTestCluster>;
let host: NodeHost | undefined;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];

const example = (file: string) =>
  parseAllDocuments(readFileSync(`${root}examples/${file}`, "utf8")).map((d) => d.toJS() as KubeObject);

/** The example SubPool and Site, and an External Proxy probed through this file's forward proxy. */
function objects(suffix: string): [Resource, KubeObject][] {
  const [pool] = example("subpool-internal.yaml") as [KubeObject];
  const [site] = example("site.yaml") as [KubeObject];
  return [
    [proxyResource, externalProxy(`edge${suffix}`, forwardProxy!.port, target!.port)],
    [subPoolResource, { ...pool, metadata: { name: `pool${suffix}` } }],
    [siteResource, { ...site, metadata: { name: `lab${suffix}` } }],
  ];
}

async function allReady(name: Name, suffix: string): Promise<void> {
  const { admin } = clusters[name];
  for (const [res, o] of objects(suffix)) {
    await eventually(
      `${name}: ${o.kind} ${o.metadata.name} Ready`,
      async () => ((await readyOf(admin, res, o)) === "True" ? true : undefined),
      180_000,
    );
  }
}

beforeAll(async () => {
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  const declared = await Promise.all(
    names.map(async (name) => {
      // CRDs, RBAC and admission policies, kubefn's ServiceAccount's kubeconfig, and the SubPool's
      // platform prerequisites (the shared proxy gateway and the Gateway).
      clusters[name] = await startFleetCluster(name, { subPoolPlatform: true });
      // West by a bare token, its server and its CA: the kubeconfig's, taken apart.
      return declarationOf(clusters[name], name === "west" ? "token" : "kubeconfig");
    }),
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
  await Promise.all(names.map((n) => clusters[n]?.devcluster.close()));
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
