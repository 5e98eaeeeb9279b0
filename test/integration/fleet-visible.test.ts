/**
 * Users see the fleet (issue 35): one Node host reconciling two devclusters of this file's own
 * (east by a kubeconfig, west by a bare token), each API server's audit webhook pointed at the
 * host with a token of its own. Each cluster's passes are named on their log lines and spans (a
 * loopback OTLP receiver); the fleet page, looked at in headless Chromium, has a section per
 * cluster; the crawler API names each Proxy's cluster and refuses east's credential for west's
 * Proxies; `kubefn doctor --clusters` checks both (and a third it cannot reach), each under its
 * name, intake acknowledged in each.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/main.ts";
import { parseNodeHostEnv } from "../../functions/node/config.ts";
import { type NodeHost, startNodeHost } from "../../functions/node/host.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { eventually } from "../e2e/host.ts";
import { dumpDom } from "../support/chromium.ts";
import {
  adminContexts,
  declarationOf,
  externalProxy,
  type FleetTestCluster,
  readyOf,
  startFleetCluster,
} from "../support/fleet-clusters.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlp-receiver.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
  unusedPort,
} from "../support/probe-fixtures.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const names = ["east", "west"] as const;
type Name = (typeof names)[number];
const auditTokens = { east: randomBytes(16).toString("hex"), west: randomBytes(16).toString("hex") };
const opsToken = randomBytes(16).toString("hex");
const eastCrawler = randomBytes(16).toString("hex");
const otelVariables = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_BSP_SCHEDULE_DELAY"] as const;
const savedEnv = Object.fromEntries(otelVariables.map((v) => [v, process.env[v]]));

const clusters = {} as Record<Name, FleetTestCluster>;
let host: NodeHost | undefined;
let receiver: OtlpReceiver | undefined;
let forwardProxy: ForwardProxy | undefined;
let target: Target | undefined;
const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  // The SDK reads its exporter's endpoint and batch delay from the process's environment.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
  process.env.OTEL_BSP_SCHEDULE_DELAY = "500";
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  const port = await unusedPort();
  await Promise.all(
    names.map(async (name) => {
      clusters[name] = await startFleetCluster(name, {
        auditWebhook: {
          url: `http://127.0.0.1:${port}/v1/events`,
          token: auditTokens[name],
          policy: `${root}infra/audit/policy.yaml`,
        },
      });
    }),
  );
  const config = parseNodeHostEnv({
    KUBEFN_CLUSTERS: JSON.stringify([
      declarationOf(clusters.east, "kubeconfig", { auditToken: auditTokens.east }),
      declarationOf(clusters.west, "token", { auditToken: auditTokens.west }),
    ]),
    KUBEFN_HOST: "127.0.0.1",
    KUBEFN_PORT: String(port),
    KUBEFN_SWEEP_SECONDS: "2",
    KUBEFN_MIN_REPORT_SECONDS: "1",
    ADMISSION_RECHECK_SECONDS: "2",
    PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
    API_TOKEN: JSON.stringify([
      { name: "ops", token: opsToken, namespaces: "*" },
      { name: "east-crawler", token: eastCrawler, namespaces: "*", clusters: ["east"] },
    ]),
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  });
  const record = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  host = await startNodeHost(config, { info: record("info"), warn: record("warn"), error: record("error") });
}, 300_000);

afterAll(async () => {
  await host?.stop();
  await Promise.all(names.map((n) => clusters[n]?.devcluster.close()));
  await Promise.all([forwardProxy?.close(), target?.close(), receiver?.close()]);
  for (const v of otelVariables) {
    if (savedEnv[v] === undefined) delete process.env[v];
    else process.env[v] = savedEnv[v];
  }
}, 120_000);

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe("users see the fleet", () => {
  it("each cluster's Proxy reaches Ready, and its passes' log lines and spans name its cluster alone", async () => {
    for (const name of names) {
      await clusters[name].admin.create(
        proxyResource,
        externalProxy(`edge-${name}`, forwardProxy!.port, target!.port),
      );
    }
    for (const name of names) {
      await eventually(
        `${name}: Proxy edge-${name} Ready`,
        async () => readyOf(clusters[name].admin, proxyResource, externalProxy(`edge-${name}`, 0, 0)),
        180_000,
      );
    }
    for (const name of names) {
      const passes = lines.filter((l) => l.msg === "pass" && String(l.fields?.key).includes(`edge-${name}`));
      expect(passes.length).toBeGreaterThan(0);
      expect(new Set(passes.map((l) => l.fields?.cluster))).toEqual(new Set([name]));
    }
    for (const name of names) {
      const spans = await eventually(
        `the spans of edge-${name}'s passes`,
        async () => {
          const found = receiver!.spans.filter((s) => s.attributes["kubefn.name"] === `edge-${name}`);
          return found.length > 0 ? found : undefined;
        },
        30_000,
      );
      expect(new Set(spans.map((s) => s.attributes["kubefn.cluster"]))).toEqual(new Set([name]));
    }
    // Every span names a declared cluster: sweeps and probe shards too.
    expect(
      receiver!.spans.every(
        (s) => s.attributes["kubefn.cluster"] === "east" || s.attributes["kubefn.cluster"] === "west",
      ),
    ).toBe(true);
    expect(
      new Set(receiver!.spans.filter((s) => s.name === "sweep").map((s) => s.attributes["kubefn.cluster"])),
    ).toEqual(new Set(names));
  }, 300_000);

  it("the crawler API names each Proxy's cluster; east's credential is refused west's Proxies", async () => {
    type Items = { items: { cluster: string; namespace: string; name: string }[] };
    const east = await fetch(`${host!.url}/v1/proxies?cluster=east`, bearer(eastCrawler));
    expect(east.status).toBe(200);
    expect(((await east.json()) as Items).items.map((i) => [i.cluster, i.namespace, i.name])).toEqual([
      ["east", "default", "edge-east"],
    ]);
    const refused = await fetch(`${host!.url}/v1/proxies?cluster=west`, bearer(eastCrawler));
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ message: "this credential may not use cluster west" });
    const lease = await fetch(`${host!.url}/v1/leases?cluster=west`, {
      method: "POST",
      headers: { authorization: `Bearer ${eastCrawler}`, "content-type": "application/json" },
      body: JSON.stringify({ holder: "w1", ttlSeconds: 30 }),
    });
    expect(lease.status).toBe(403);
    await lease.text();
    const west = await fetch(`${host!.url}/v1/proxies?cluster=west`, bearer(opsToken));
    expect(((await west.json()) as Items).items.map((i) => [i.cluster, i.name])).toEqual([
      ["west", "edge-west"],
    ]);
  });

  it("Chromium shows the fleet page with a section per cluster, headed by its name, each with its own Proxy", async () => {
    const refused = await fetch(`${host!.url}/`, bearer(eastCrawler));
    expect(refused.status).toBe(403);
    await refused.text();
    const dom = await dumpDom(host!.url.replace("http://", `http://ops:${opsToken}@`));
    const sections = [...dom.matchAll(/<section><h2>Cluster (\w+)<\/h2>(.*?)<\/section>/gs)];
    expect(sections.map((m) => m[1])).toEqual(["east", "west"]);
    for (const [i, name] of names.entries()) {
      const html = sections[i]?.[2] ?? "";
      expect(html).toMatch(
        new RegExp(`<tr><td>default/edge-${name}</td><td><span class="c good">Ready</span>`),
      );
      expect(html).not.toContain(`edge-${names[1 - i]}`);
      // Its own passes, run by its own kubefn.
      expect(html).toContain(`proxy/default/edge-${name}`);
    }
    expect(dom).toMatch(/<h1>kubefn fleet<\/h1>2 clusters; this view sent \d+ list requests/);
  });

  it("kubefn doctor --clusters checks each cluster under its name, intake acknowledged in each; one it cannot reach fails alone", async () => {
    const kubeconfig = adminContexts([clusters.east, clusters.west], {
      gone: `https://127.0.0.1:${await unusedPort()}`,
    });
    const { out, code } = await main([
      "doctor",
      "--kubeconfig",
      kubeconfig,
      "--clusters",
      "east,west,gone",
      "--intake-timeout",
      "60",
    ]);
    expect(code).toBe(1);
    const sections = out.split("\n\n");
    expect(sections.map((s) => s.split("\n")[0])).toEqual([
      "cluster east",
      "cluster west",
      "cluster gone",
      expect.any(String),
    ]);
    for (const [i, name] of names.entries()) {
      expect(sections[i], out).toMatch(/\nok {3}intake received the intake canary's creation from /);
      expect(sections[i], out).toMatch(
        new RegExp(`\n${name}: (all \\d+ checks passed|\\d+ of \\d+ checks failed)$`),
      );
    }
    expect(sections[2]).toMatch(/^cluster gone\nfail cannot check cluster gone: /);
    expect(sections[3]).toMatch(/^3 clusters: \d ready, \d not \((.*, )?gone\)$/);
  }, 180_000);
});
