/**
 * The fleet page (`GET /`) of the Node host, as a separate process against the run's devcluster,
 * looked at in Debian's headless Chromium: the objects the test made, in the states the API server
 * holds, their colours really painted, the latency chart drawn, the passes that ran listed, a
 * hostile provider name and annotation shown as text (not markup), and the API token enforced.
 */

import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { chartColour, toneColours } from "../../shared/app/fleet/render.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { createKube, isNotFound, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { clusterInfo, kubeConfig } from "../setup/cluster.ts";
import { dumpDom, screenshot } from "../support/chromium.ts";
import { removeNamespaces } from "../support/namespaces.ts";
import { countColour } from "../support/png.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
  unusedPort,
} from "../support/probe-fixtures.ts";
import { subPoolObject } from "../support/subpools.ts";
import { eventually, functionsKubeconfig, type HostProcess, startHost } from "./host.ts";

type Proxy = ProxyObject & KubeObject;

const token = randomBytes(18).toString("hex");
const namespace = `fleet-page-${randomBytes(3).toString("hex")}`;
const pool = `fleet-page-${randomBytes(3).toString("hex")}`;
/** A provider name is tenant-written, and the reconciler quotes it in the Failed message. */
const hostile = `x"><script>document.title="pwned"</script><b id="inj">bold</b><img src=x>`;

let admin: Kube;
let host: HostProcess;
let forwardProxy: ForwardProxy;
let target: Target;

const external = (name: string, port: number, healthCheck: Record<string, unknown>): KubeObject => ({
  apiVersion: "crawl.kubefn.dev/v1alpha1",
  kind: "Proxy",
  metadata: { namespace, name },
  spec: { mode: "External", endpoint: { host: "127.0.0.1", port, scheme: "http" }, healthCheck },
});

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()), { fieldManager: "fleet-page-test" });
  const kubeconfig = await functionsKubeconfig(clusterInfo().kubeconfig);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(admin, namespace);
  [forwardProxy, target] = await Promise.all([startForwardProxy(), startHttpTarget()]);
  const probe = {
    probeURL: `http://127.0.0.1:${target.port}/`,
    intervalSeconds: 5,
    successThreshold: 1,
    failureThreshold: 1,
  };
  await admin.create(proxyResource, external("ready", forwardProxy.port, probe));
  await admin.create(proxyResource, external("dead", await unusedPort(), probe));
  await admin.create(proxyResource, {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { namespace, name: "hostile", annotations: { "example.com/note": hostile } },
    spec: { mode: "Managed", provider: hostile, cloudInit: { inline: "#cloud-config\n" } },
  });
  // Invalid (a zero CPU request): Ready=False, InvalidSpec, and nothing created for it.
  await admin.create(
    subPoolResource,
    subPoolObject(
      {
        cpa: { image: "ghcr.io/subrelay/cpa:1.4.0", resources: { requests: { cpu: "0", memory: "512Mi" } } },
      },
      { name: pool, uid: undefined, generation: undefined },
    ),
  );
  // Started once the objects exist: its first sweep sends each a pass. This host gets no events:
  // a change after that sweep waits for the sweep's next drift decisions, at a wall-clock
  // boundary of the Proxy resync — the default's 300 s would outlast the waits here (the hostile
  // Proxy has no probe to bring a pass sooner; its deletion at the end needs one), 60 s does not.
  host = await startHost({
    KUBECONFIG: kubeconfig,
    KUBEFN_SWEEP_SECONDS: "2",
    KUBEFN_PROXY_RESYNC_SECONDS: "60",
    KUBEFN_API_TOKEN: token,
  });
  await eventually(
    "ready Ready with a latency, dead Unhealthy, hostile Failed, the SubPool NotReady",
    async () => {
      const get = (name: string) => admin.get<Proxy>(proxyResource, { namespace, name });
      const [ready, dead, bad] = await Promise.all([get("ready"), get("dead"), get("hostile")]);
      const sp = await admin.get(subPoolResource, { name: pool });
      const spReady = (
        sp as { status?: { conditions?: Array<{ type: string; status: string }> } }
      ).status?.conditions?.find((c) => c.type === "Ready");
      return ready.status?.phase === "Ready" &&
        ready.status.latencyMillis !== undefined &&
        dead.status?.phase === "Unhealthy" &&
        bad.status?.phase === "Failed" &&
        spReady?.status === "False"
        ? true
        : undefined;
    },
    120_000,
  );
}, 240_000);

afterAll(async () => {
  // Deleted while the host runs, so that it takes their finalizers off; gone before the next file.
  try {
    if (admin) {
      await admin.delete(subPoolResource, { name: pool }).catch(() => undefined);
      await removeNamespaces(admin, [namespace]);
      await eventually(
        "the SubPool gone",
        () =>
          admin.get(subPoolResource, { name: pool }).then(
            () => undefined,
            (err: unknown) => (isNotFound(err) ? true : undefined),
          ),
        60_000,
      );
    }
  } finally {
    await host?.stop();
    await Promise.all([forwardProxy?.close(), target?.close()]);
  }
}, 180_000);

/** The page URL with the token as the Basic auth password, as a browser sends it after the prompt. */
const withToken = () => host.url.replace("http://", `http://fleet:${token}@`);

describe("the fleet page on the Node host", () => {
  it("needs the API token: 401 with a Basic challenge without it or with a wrong one, 200 with it", async () => {
    const none = await fetch(`${host.url}/`);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Basic /);
    expect(await none.text()).not.toContain(namespace);
    const wrong = await fetch(`${host.url}/`, { headers: { authorization: `Bearer ${token}0` } });
    expect(wrong.status).toBe(401);
    const ok = await fetch(`${host.url}/`, { headers: { authorization: `Bearer ${token}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-security-policy")).toMatch(/^default-src 'none'; style-src 'sha256-/);
    // A reload within the cache's 5 s sends no request to the API server.
    const again = await fetch(`${host.url}/`, { headers: { authorization: `Bearer ${token}` } });
    expect(await again.text()).toMatch(
      /this view sent none: it shows the read of \d+ s ago \(3 list requests;/,
    );
  });

  it("Chromium renders each object in the state the API server holds, the passes and their triggers", async () => {
    const dom = await dumpDom(withToken());
    const row = (name: string) =>
      new RegExp(
        `<tr><td>${namespace}/${name}</td><td><span class="c (\\w+)">(\\w+)</span></td><td>([^<]*)</td><td>([^<]*)</td>`,
      ).exec(dom);
    const ready = await admin.get<Proxy>(proxyResource, { namespace, name: "ready" });
    expect(row("ready")?.slice(1, 3)).toEqual(["good", "Ready"]);
    expect(row("ready")?.[4]).toMatch(/^\d+ ms$/);
    expect(row("dead")?.slice(1, 4)).toEqual(["bad", "Unhealthy", "ProbeFailed"]);
    expect(row("hostile")?.slice(1, 4)).toEqual(["bad", "Failed", "UnknownProvider"]);
    expect(dom).toMatch(
      new RegExp(`<tr><td>${pool}</td><td><span class="c busy">NotReady</span></td><td>InvalidSpec</td>`),
    );
    expect(ready.status?.latencyMillis).toBeGreaterThanOrEqual(0);
    // The passes this host ran, with why: its first sweep's, then one for the probes' verdict (drift).
    expect(dom).toMatch(new RegExp(`<td>proxy/${namespace}/ready</td><td>drift:[a-zA-Z-]+</td>`));
    expect(dom).toMatch(
      new RegExp(
        `<td>proxy/${namespace}/hostile</td><td>[^<]+</td><td><span class="c bad">error</span></td><td>permanent/UnknownProvider`,
      ),
    );
    expect(dom).toContain(`fill="${chartColour}"`);
  });

  it("a hostile provider name and annotation stay text: no element, no script run", async () => {
    const dom = await dumpDom(withToken());
    // The reconciler quoted the provider name in the Failed message; the page shows it as text.
    expect(dom).toContain('&lt;b id="inj"&gt;bold&lt;/b&gt;');
    expect(dom).not.toContain('<b id="inj">');
    expect(dom).not.toContain("<img src");
    expect(dom).toContain("<title>kubefn fleet</title>");
    expect(dom).not.toContain("<title>pwned");
    // Annotations are never on the page.
    expect(dom).not.toContain("example.com/note");
  });

  it("the screenshot shows the state colours, the chart and the styled header (a page without them: none)", async () => {
    const page = await screenshot(withToken(), 1200, 2400);
    // The control: the same check on a page of the same host that has none of them.
    const refused = await screenshot(`${host.url}/robots.txt`, 800, 600);
    const colours = { ...toneColours, chart: chartColour, header: "#263238" };
    const painted = Object.fromEntries(
      Object.entries(colours).map(([k, hex]) => [k, countColour(page, hex)]),
    );
    const refusedPainted = Object.fromEntries(
      Object.entries(colours).map(([k, hex]) => [k, countColour(refused, hex)]),
    );
    // Each is a bar segment or chip of hundreds of pixels: a stray anti-aliased edge is not enough.
    expect(painted.good).toBeGreaterThan(500);
    expect(painted.bad).toBeGreaterThan(500);
    expect(painted.busy).toBeGreaterThan(500);
    expect(painted.chart).toBeGreaterThan(300);
    // The header's background comes from the stylesheet: the CSP's hash let it apply.
    expect(painted.header).toBeGreaterThan(1200 * 30);
    expect(refusedPainted).toEqual({ good: 0, bad: 0, busy: 0, unknown: 0, chart: 0, header: 0 });
  });
});
