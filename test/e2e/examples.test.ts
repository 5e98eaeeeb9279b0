/**
 * Every example in examples/, applied with the devcluster's kubectl as the README says, reaching
 * its documented state through the Node host as `npm start` runs it: its own devcluster, whose
 * audit webhook brings each change to the host, which reconciles as the least-privileged
 * ServiceAccount. Also: `kubectl apply -k infra/`, and `kubectl describe` telling each object's
 * story through Events that are not rewritten in steady state. Last, the pages' own commands:
 * every `$DC kubectl …` line of docs/getting-started.md and the README's tour, run in order, each
 * showing the output the page shows.
 *
 * The only edit to the example files: the Proxy examples' fixed ports (3128, 8081) become free
 * ports, since other test runs may share this machine.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterInfo, type KubectlResult } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { fencedBlocks } from "../support/markdown.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import { eventually, type HostProcess, startHost } from "./host.ts";

const example = (name: string) => fileURLToPath(new URL(`../../examples/${name}`, import.meta.url));
const root = fileURLToPath(new URL("../../", import.meta.url));

let host: HostProcess;
let target: Target;
let externalProxy: ForwardProxy;
let proxyExternalYaml: string;
let proxyManagedYaml: string;
let kubeconfig: string;

/** The devcluster's kubectl against the host's own cluster. */
function kubectl(args: string[], input?: string): Promise<KubectlResult> {
  return outputOf(
    spawn(clusterInfo().devclusterBin, ["kubectl", "--kubeconfig", kubeconfig, ...args]),
    input ?? "",
  );
}

async function ok(args: string[], input?: string): Promise<string> {
  const r = await kubectl(args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

const jsonpath = (args: string[], path: string) => ok([...args, "-o", `jsonpath=${path}`]);
const condition = (args: string[], type: string) =>
  jsonpath(args, `{.status.conditions[?(@.type=="${type}")].status}`);

/** The Events kubefn recorded about one object, as events.k8s.io/v1 sees them. */
async function eventsAbout(namespace: string, name: string) {
  const out = await ok(["get", "events.v1.events.k8s.io", "-n", namespace, "-o", "json"]);
  const items = (
    JSON.parse(out) as {
      items: {
        metadata: { name: string; resourceVersion: string };
        regarding?: { name?: string };
        reportingController?: string;
        reason: string;
        type: string;
        note?: string;
        series?: { count: number };
      }[];
    }
  ).items;
  return items.filter((e) => e.regarding?.name === name && e.reportingController?.startsWith("kubefn.dev/"));
}

beforeAll(async () => {
  target = await startHttpTarget();
  externalProxy = await startForwardProxy();
  const swap = (yaml: string) =>
    yaml
      .replaceAll("127.0.0.1:8081", `127.0.0.1:${target.port}`)
      .replace(/port: 3128/, `port: ${externalProxy.port}`);
  proxyExternalYaml = swap(readFileSync(example("proxy-external.yaml"), "utf8"));
  proxyManagedYaml = swap(readFileSync(example("proxy-managed.yaml"), "utf8"));
  host = await startHost({ KUBEFN_SWEEP_SECONDS: "1", KUBEFN_MIN_REPORT_SECONDS: "1" });
  kubeconfig = String((await host.waitFor((l) => l.msg === "cluster up")).kubeconfig);
}, 240_000);

afterAll(async () => {
  // Stopping the host stops its devcluster and removes its data: nothing to clean up in it.
  if (host) expect(await host.stop()).toBe(0);
  await target?.close();
  await externalProxy?.close();
}, 60_000);

describe("kubectl apply -k infra/", () => {
  it("installs the CRDs, kubefn's RBAC and its admission policies, and no process (install.yaml's cluster side)", async () => {
    // Every manifest the host installs from infra/crds and infra/rbac is in the kustomization.
    const listed = readFileSync(`${root}infra/kustomization.yaml`, "utf8");
    for (const dir of ["crds", "rbac"]) {
      for (const file of readdirSync(`${root}infra/${dir}`).filter((f) => /\.ya?ml$/.test(f))) {
        expect(listed, `${dir}/${file}`).toContain(`- ${dir}/${file}`);
      }
    }
    const out = await ok(["apply", "-k", `${root}infra`]);
    for (const line of [
      "customresourcedefinition.apiextensions.k8s.io/proxies.crawl.kubefn.dev",
      "customresourcedefinition.apiextensions.k8s.io/subpools.subrelay.example.com",
      "customresourcedefinition.apiextensions.k8s.io/sites.unbounded-cloud.io",
      "namespace/kubefn-system",
      "serviceaccount/kubefn",
      "clusterrole.rbac.authorization.k8s.io/kubefn",
      "clusterrolebinding.rbac.authorization.k8s.io/kubefn-proxy",
      "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-writes-only-its-own",
      "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-never-edits-specs",
      "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-references-need-access",
      "validatingadmissionpolicy.admissionregistration.k8s.io/kubefn-state-is-kubefns",
      "configmap/kubefn-status-writers",
    ]) {
      expect(out).toContain(line);
    }
    // A cluster a Worker or a Lambda reconciles gets no second reconciler, nor a relay unasked.
    expect(out).not.toMatch(/^deployment\.apps\//m);
  });
});

describe("the Proxy examples", () => {
  it("proxy-external.yaml becomes Ready through the local forward proxy", async () => {
    expect(await ok(["apply", "-f", "-"], proxyExternalYaml)).toContain("proxy.crawl.kubefn.dev/local");
    await eventually(
      "local Ready",
      async () =>
        (await jsonpath(["get", "proxy", "local", "-n", "default"], "{.status.phase}")) === "Ready"
          ? true
          : undefined,
      90_000,
    );
    expect(await ok(["get", "proxies", "-n", "default", "local"])).toMatch(
      /local\s+External\s+Ready\s+127\.0\.0\.1/,
    );
    expect(externalProxy.requests.length).toBeGreaterThan(0);
  });

  it("proxy-managed.yaml becomes Ready through the forward proxy the devcluster runs in its Pod", async () => {
    expect(await ok(["apply", "-f", "-"], proxyManagedYaml)).toContain("proxy.crawl.kubefn.dev/managed");
    await eventually(
      "managed Ready",
      async () =>
        (await jsonpath(["get", "proxy", "managed", "-n", "default"], "{.status.phase}")) === "Ready"
          ? true
          : undefined,
      90_000,
    );
    const ip = await jsonpath(["get", "proxy", "managed", "-n", "default"], "{.status.ip}");
    expect(ip).toMatch(/^127\.1\./);
    expect(target.hits).toBeGreaterThan(0);
  });

  it("kubectl describe tells the Managed Proxy's story, and steady state adds no Events", async () => {
    const described = await ok(["describe", "proxy", "managed", "-n", "default"]);
    expect(described).toMatch(/Events:/);
    expect(described).toMatch(/Normal\s+InstanceCreated/);
    expect(described).toMatch(/Normal\s+Created/);
    const before = await eventsAbout("default", "managed");
    expect(before.length).toBeGreaterThanOrEqual(2);
    // Several sweeps and probes later (sweep every second), no Event is written or counted again.
    await new Promise((r) => setTimeout(r, 5000));
    const after = await eventsAbout("default", "managed");
    expect(after.map((e) => [e.metadata.name, e.metadata.resourceVersion])).toEqual(
      before.map((e) => [e.metadata.name, e.metadata.resourceVersion]),
    );
  });
});

describe("the SubPool examples", () => {
  it("the platform prerequisites: the shared proxy gateway rolls out, the Gateway is Programmed", async () => {
    await ok(["apply", "-f", example("subpool-platform.yaml")]);
    await eventually("mihomo has a ready endpoint", async () =>
      (await jsonpath(
        ["get", "endpointslices", "-n", "subrelay-system", "-l", "kubernetes.io/service-name=mihomo"],
        "{.items[*].endpoints[*].conditions.ready}",
      )) === "true"
        ? true
        : undefined,
    );
    await eventually("Gateway Programmed", async () =>
      (await condition(["get", "gateway", "shared", "-n", "gateway-system"], "Programmed")) === "True"
        ? true
        : undefined,
    );
  });

  it("subpool-internal.yaml: demo-pool becomes Ready with its StatefulSet running on a bound volume", async () => {
    await ok(["apply", "-f", example("subpool-internal.yaml")]);
    await eventually(
      "demo-pool Ready",
      async () => ((await condition(["get", "subpool", "demo-pool"], "Ready")) === "True" ? true : undefined),
      120_000,
    );
    expect(await ok(["get", "sp", "demo-pool"])).toMatch(
      /demo-pool\s+Internal\s+\S*\s*subpool-demo-pool\s+True/,
    );
    expect(
      await jsonpath(
        ["get", "pvc", "-n", "subpool-demo-pool", "data-demo-pool-cpa-manager-0"],
        "{.status.phase}",
      ),
    ).toBe("Bound");
    expect(
      await jsonpath(
        ["get", "statefulset", "-n", "subpool-demo-pool", "demo-pool-cpa-manager"],
        "{.status.readyReplicas}",
      ),
    ).toBe("1");
    const described = await ok(["describe", "subpool", "demo-pool"]);
    expect(described).toMatch(/Normal\s+Ready\s+.*Ready=True/);
  });

  it("subpool-gateway.yaml: team-b's HTTPRoute is Accepted by the Gateway, and team-b becomes Ready", async () => {
    await ok(["apply", "-f", example("subpool-gateway.yaml")]);
    await eventually(
      "team-b Ready",
      async () => ((await condition(["get", "subpool", "team-b"], "Ready")) === "True" ? true : undefined),
      120_000,
    );
    expect(await condition(["get", "subpool", "team-b"], "RouteReady")).toBe("True");
    const route = JSON.parse(await ok(["get", "httproute", "-n", "subpool-team-b", "-o", "json"])) as {
      items: {
        spec: { hostnames?: string[] };
        status: { parents: { conditions: { type: string; status: string }[] }[] };
      }[];
    };
    expect(route.items).toHaveLength(1);
    expect(route.items[0]!.spec.hostnames).toEqual(["team-b.pools.example.test"]);
    const conds = route.items[0]!.status.parents[0]!.conditions;
    expect(conds.find((c) => c.type === "Accepted")?.status).toBe("True");
    expect(conds.find((c) => c.type === "ResolvedRefs")?.status).toBe("True");
    expect(
      await jsonpath(
        ["get", "gateway", "shared", "-n", "gateway-system"],
        "{.status.listeners[0].attachedRoutes}",
      ),
    ).toBe("1");
  });
});

describe("the Site example", () => {
  it("site.yaml: lab gets NetReady, MachinaReady, MetalmanReady and StorageReady", async () => {
    await ok(["apply", "-f", example("site.yaml")]);
    await eventually(
      "lab reconciled",
      async () => {
        const got = await jsonpath(["get", "site", "lab"], "{.status.conditions[*].status}");
        return got === "True True True True True" ? true : undefined;
      },
      90_000,
    );
    // One condition per component in registry order, then the summary `kubectl wait` reads.
    expect(await jsonpath(["get", "site", "lab"], "{.status.conditions[*].type}")).toBe(
      "NetReady MachinaReady MetalmanReady StorageReady Ready",
    );
    // A healthy start is no news; switching a component off is, and kubectl describe says so.
    expect(await ok(["describe", "site", "lab"])).not.toMatch(/Warning/);
    await ok([
      "patch",
      "site",
      "lab",
      "--type",
      "merge",
      "-p",
      '{"spec":{"components":{"metalman":{"enabled":false}}}}',
    ]);
    await eventually("the Disabled event", async () => {
      const described = await ok(["describe", "site", "lab"]);
      return /Normal\s+Disabled\s+.*kubefn\.dev\/site\s+MetalmanReady=True: metalman is disabled/.test(
        described,
      )
        ? true
        : undefined;
    });
  });
});

describe("the fleet page, as docs/getting-started.md describes it", () => {
  it("GET / shows every example object Ready, the latency chart and the passes, open without a token", async () => {
    const res = await fetch(`${host.url}/`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("No API token is set, so this page is open and hides condition messages.");
    const stateOf = (key: string) =>
      new RegExp(`<tr><td>${key}</td><td><span class="c (\\w+)">(\\w+)</span>`).exec(html)?.slice(1, 3);
    for (const key of ["default/local", "default/managed", "demo-pool", "team-b", "lab"]) {
      expect(stateOf(key), key).toEqual(["good", "Ready"]);
    }
    expect(html).toMatch(/<h2>Proxy: 2<\/h2>.*<h2>SubPool: 2<\/h2>.*<h2>Site: 1<\/h2>/s);
    expect(html).toContain("<h2>Probe latency</h2><svg");
    // The last passes, each with why it ran.
    expect(html).toMatch(
      /<h2>Last passes<\/h2>.*<td>(proxy|subpool|site)\/[^<]*<\/td><td>(audit|follow-up|start|safety-net|shard:probe|drift:[\w-]+)<\/td>/s,
    );
  });
});

describe("the host's /metrics", () => {
  it("exposes the series infra/monitoring/alerts.yaml alerts on, with the labels its promtool tests feed", async () => {
    const text = await (await fetch(`${host.url}/metrics`)).text();
    const labelsOf = (series: string) => [...series.matchAll(/([a-z_]+)="/g)].map((m) => m[1] ?? "").sort();
    const exposed = new Map<string, string[]>();
    for (const line of text.split("\n")) {
      const m = /^([a-z_:]+)(\{[^}]*\})? /.exec(line);
      if (m?.[1]) exposed.set(m[1], labelsOf(m[2] ?? ""));
    }
    for (const metric of [
      "kubefn_passes_total",
      "kubefn_sweep_last_success_timestamp_seconds",
      "kubefn_proxies",
      "kubefn_proxy_last_probe_timestamp_seconds",
    ]) {
      expect(exposed.has(metric), metric).toBe(true);
    }
    // infra/monitoring/alerts.test.yaml's input series: where this host exposes the metric, the
    // test series carries the same label names (the rules aggregate by them), besides the target
    // labels Prometheus adds to every scraped series (job, instance) and `cluster`, which every
    // series of a fleet carries and this one-cluster host's do not (a rule `by (cluster)` reads both).
    const tests = readFileSync(`${root}infra/monitoring/alerts.test.yaml`, "utf8");
    const targetLabels = new Set(["job", "instance", "cluster"]);
    let compared = 0;
    for (const m of tests.matchAll(/series: '([a-z_:]+)(\{[^}]*\})?'/g)) {
      const live = exposed.get(m[1]!);
      if (!live) continue;
      expect(
        labelsOf(m[2] ?? "").filter((l) => !targetLabels.has(l)),
        m[1],
      ).toEqual(live);
      compared++;
    }
    expect(compared).toBeGreaterThanOrEqual(4);
  });
});

/** One `$DC kubectl …` line of a page, and the output the page shows under it (`# …` lines). */
interface PageCommand {
  page: string;
  line: string;
  args: string[];
  comment: string;
  shown: string[];
}

/** Splits a shell line into words as sh would (quotes, backslashes, a `#` comment); no expansions. */
function shellWords(line: string): { words: string[]; comment: string } {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "#" && word === undefined) {
      return { words, comment: line.slice(i + 1).trim() };
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated ' in ${line}`);
      word = (word ?? "") + line.slice(i + 1, end);
      i = end;
    } else if (c === '"' || c === "$" || c === "`" || c === "|" || c === ";" || c === "&") {
      throw new Error(`${line}: the walk runs plain kubectl lines only (no ${c})`);
    } else if (c === "\\") {
      word = (word ?? "") + (line[++i] ?? "");
    } else {
      word = (word ?? "") + c;
    }
  }
  if (word !== undefined) words.push(word);
  return { words, comment: "" };
}

function pageCommands(page: string): PageCommand[] {
  const commands: PageCommand[] = [];
  for (const block of fencedBlocks(readFileSync(`${root}${page}`, "utf8"), "sh")) {
    let current: PageCommand | undefined;
    for (const line of block.split("\n")) {
      const m = /^(?:\$DC|infra\/devcluster\/bin\/devcluster) kubectl (.*)$/.exec(line.trim());
      if (m) {
        const { words, comment } = shellWords(m[1]!);
        current = { page, line: line.trim(), args: words, comment, shown: [] };
        commands.push(current);
      } else if (current && line.startsWith("# ")) {
        current.shown.push(line.slice(2));
      } else {
        current = undefined;
      }
    }
  }
  return commands;
}

/** Ages, latencies and addresses differ from run to run; names, modes, phases and reasons do not. */
const steadyTokens = (line: string) => line.split(/\s+/).filter((t) => t !== "" && !/^\d[\d.smhd]*$/.test(t));

/** Whether `line`'s steady tokens appear, in order, among those of one line of `output`. */
function showsLine(output: string, line: string): boolean {
  const want = steadyTokens(line);
  return output.split("\n").some((real) => {
    const got = steadyTokens(real);
    let i = 0;
    for (const t of got) if (t === want[i]) i++;
    return i === want.length;
  });
}

/** What a watch (`-w`) shows in the end: the header and each object's last line. */
function settled(shown: string[]): string[] {
  const [header, ...rows] = shown;
  const last = new Map(rows.map((r) => [r.trim().split(/\s+/)[0]!, r]));
  return [...(header ? [header] : []), ...last.values()];
}

describe("the pages' commands, run as a reader runs them", () => {
  const pages = ["docs/getting-started.md", "README.md"];
  const commands = pages.flatMap(pageCommands);

  it("finds the tour in the README: a Proxy Ready, a Secret rotated, a SubPool deleted, a Site", () => {
    const readme = commands.filter((c) => c.page === "README.md").map((c) => c.args.join(" "));
    expect(readme).toContain("apply -f examples/proxy-external.yaml");
    expect(readme.some((c) => c.startsWith("patch secret proxy-cloud-init"))).toBe(true);
    expect(readme).toContain("delete sp team-b");
    expect(readme).toContain("apply -f examples/site.yaml");
    expect(commands.filter((c) => c.page === "docs/getting-started.md").length).toBeGreaterThan(0);
  });

  it.each(commands.map((c) => [`${c.page}: ${c.line}`, c] as const))(
    "%s",
    async (_line, command) => {
      const args = command.args.filter((a) => a !== "-w" && a !== "--watch");
      const file = args[0] === "apply" && args[1] === "-f" ? args[2] : undefined;
      const swapped: Record<string, string> = {
        "examples/proxy-external.yaml": proxyExternalYaml,
        "examples/proxy-managed.yaml": proxyManagedYaml,
      };
      const run = () =>
        file?.startsWith("examples/")
          ? kubectl(["apply", "-f", swapped[file] === undefined ? `${root}${file}` : "-"], swapped[file])
          : kubectl(args);
      const shown = command.args.length > args.length ? settled(command.shown) : command.shown;
      if (shown.length === 0) {
        const r = await run();
        expect(r.code, r.stderr).toBe(0);
        if (/prints nothing/.test(command.comment)) expect(r.stdout.trim()).toBe("");
        return;
      }
      let last = "";
      await eventually(
        `${command.line} shows what the page shows`,
        async () => {
          const r = await run();
          last = r.stdout + r.stderr;
          return r.code === 0 && shown.every((line) => showsLine(r.stdout, line)) ? true : undefined;
        },
        120_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\npage shows:\n${shown.join("\n")}\nkubectl printed:\n${last}`);
      });
    },
    150_000,
  );

  it("after the tour the fleet page counts what docs/getting-started.md says: 2 Proxies, 1 SubPool, 1 Site", async () => {
    const html = await (await fetch(`${host.url}/`)).text();
    expect(html).toMatch(/<h2>Proxy: 2<\/h2>.*<h2>SubPool: 1<\/h2>.*<h2>Site: 1<\/h2>/s);
    const page = readFileSync(`${root}docs/getting-started.md`, "utf8");
    expect(page).toContain("`Proxy: 2`");
    expect(page).toContain("`SubPool: 1` (`demo-pool`, Ready; the tour deleted `team-b`)");
    expect(page).toContain("`Site: 1`");
  });
});
