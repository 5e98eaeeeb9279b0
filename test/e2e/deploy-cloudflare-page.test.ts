/**
 * docs/deploying/cloudflare.md walked literally from the release's artifacts (`npm run release`
 * into dist/), on a devcluster shaped like production (`--profile production`: the API server
 * alone over TLS with a private CA, ServiceAccount tokens of at most an hour), where a Worker can
 * reach the API server only through the relay's tunnel ("A private API server").
 *
 * The page's own commands run with `bash`, in order, in a directory laid out as the release (the
 * checkout's folders linked, dist/ built by scripts/release.ts) with `kubectl` and `kubefn` on the
 * PATH; a command that fails fails the test. The commands that target Cloudflare's account are the
 * ones substituted, each by what it would deploy, with the same parameters:
 *
 * - `wrangler queues create kubefn` / `kubefn-dlq`: workerd makes the queues the Worker's
 *   wrangler.toml binds (the test checks that it binds these names);
 * - `<command> | wrangler secret put NAME --config dist/cloudflare/wrangler.toml`: the command
 *   runs as written, and its output is the secret NAME the Worker is given;
 * - `wrangler deploy --config dist/cloudflare/wrangler.toml --var K:V …`: that wrangler.toml and
 *   its bundle (dist/cloudflare/worker.js, uploaded as built) run in workerd through wrangler's
 *   test harness, with those `--var`s;
 * - `https://kubefn.<account>.workers.dev` (the Worker's address in the install and the tunnel's
 *   URL): the harness's loopback address, as DNS would give the real one;
 * - the relay's Deployment, whose Pod runs no image on the devcluster, runs as a process of
 *   infra/relay/main.ts (what its image runs) with exactly the Deployment's environment (read back
 *   from the cluster after the page's `kubectl set env`, its Secret resolved) and a token of its
 *   ServiceAccount in place of the projected one;
 * - Cloudflare's cron trigger (every minute): the harness's `scheduled()`, every few seconds;
 * - `wrangler delete`: the harness closed.
 *
 * Beyond the page: PROBE_ALLOWED_CIDRS for the loopback probe fixtures, the examples' Proxy
 * pointed at them. Then the examples' Proxy, SubPool and Site become Ready, reconciled by the
 * Worker through the tunnel, and `kubefn uninstall` (while the Worker runs, as the page says)
 * leaves nothing of kubefn in the cluster.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestHarness, type TestHarness } from "wrangler";
import { stringify as toYaml } from "yaml";
import { release } from "../../scripts/release.ts";
import { kubefnCli, unpackRelease, walkPage } from "../support/deploy-page.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { freePort } from "../support/oidc-issuer.ts";
import { type OwnDevcluster, startOwnDevcluster } from "../support/own-devcluster.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import type { TempDir } from "../support/temp-dir.ts";
import { eventually } from "./host.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
/** The account's workers.dev address the page's `<account>` stands for. */
const workerOrigin = "https://kubefn.walk.workers.dev";

let cluster: OwnDevcluster;
let work: TempDir;
let harness: TestHarness | undefined;
let workerUrl: URL;
let sweeping: ReturnType<typeof setInterval> | undefined;
const sweepFailures: string[] = [];
let relay: ChildProcess | undefined;
let relayLog = "";
let target: Target;
let forwardProxy: ForwardProxy;

const walk = walkPage({
  page: "docs/deploying/cloudflare.md",
  workDir: () => work.path,
  kubeconfig: () => cluster.kubeconfig,
});
const { sh, kubectl } = walk;

/** The `sh` block of the page whose text contains `marker`, one command a line (`\` joined). */
function commandsOf(marker: string): string[] {
  return walk
    .blockWith(marker)
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

const withAccount = (command: string) =>
  command
    .replaceAll("https://kubefn.<account>.workers.dev", workerOrigin)
    .replaceAll("wss://kubefn.<account>.workers.dev", workerOrigin.replace("https:", "wss:"));

/** The Worker's address on the page → the harness's loopback address. */
function toHarness(url: string): string {
  const u = new URL(url);
  if (u.origin !== workerOrigin && `https://${u.host}` !== workerOrigin)
    throw new Error(`not the Worker's address: ${url}`);
  const local = new URL(workerUrl);
  local.protocol = u.protocol === "wss:" ? "ws:" : "http:";
  local.pathname = u.pathname;
  local.search = u.search;
  return local.href;
}

/** The relay as its Deployment says: its environment, its Secret, its ServiceAccount. */
async function startRelayAsDeployed(): Promise<ChildProcess> {
  const deployment = JSON.parse(
    await kubectl("-n", "kubefn-system", "get", "deployment", "kubefn-relay", "-o", "json"),
  ) as {
    spec: {
      template: {
        spec: {
          serviceAccountName: string;
          containers: Array<{
            env: Array<{
              name: string;
              value?: string;
              valueFrom?: { secretKeyRef?: { name: string; key: string } };
            }>;
          }>;
        };
      };
    };
  };
  const pod = deployment.spec.template.spec;
  const env: Record<string, string> = {};
  for (const e of pod.containers[0]!.env) {
    const ref = e.valueFrom?.secretKeyRef;
    env[e.name] = ref
      ? Buffer.from(
          await kubectl(
            "-n",
            "kubefn-system",
            "get",
            "secret",
            ref.name,
            "-o",
            `jsonpath={.data.${ref.key}}`,
          ),
          "base64",
        ).toString("utf8")
      : (e.value ?? "");
  }
  // The Pod's address and port are the cluster's; here, a loopback port and the harness's URL.
  env.KUBEFN_INTAKE_URL = toHarness(env.KUBEFN_INTAKE_URL ?? "");
  env.KUBEFN_TUNNEL_URL = toHarness(env.KUBEFN_TUNNEL_URL ?? "");
  env.KUBEFN_RELAY_PORT = String(await freePort());
  // Its ServiceAccount's token, as the Pod's projected volume would hold it.
  const token = (await kubectl("-n", "kubefn-system", "create", "token", pod.serviceAccountName)).trim();
  const kubeconfig = join(work.path, "relay.kubeconfig");
  writeFileSync(
    kubeconfig,
    toYaml({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "c", cluster: { server: cluster.server, "certificate-authority-data": cluster.caData } },
      ],
      users: [{ name: "relay", user: { token } }],
      contexts: [{ name: "c", context: { cluster: "c", user: "relay" } }],
      "current-context": "c",
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "infra/relay/main.ts"], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH, ...env, KUBECONFIG: kubeconfig },
  });
  const append = (c: string) => {
    relayLog = (relayLog + c).slice(-50_000);
  };
  child.stdout?.setEncoding("utf8").on("data", append);
  child.stderr?.setEncoding("utf8").on("data", append);
  await eventually(
    "the relay's tunnel open",
    async () => {
      if (child.exitCode !== null) throw new Error(`the relay exited (${child.exitCode}):\n${relayLog}`);
      return relayLog.includes('"msg":"tunnel open"') ? true : undefined;
    },
    60_000,
  );
  return child;
}

async function stopRelay(): Promise<void> {
  if (relay && relay.exitCode === null && relay.signalCode === null) {
    const exited = new Promise((resolve) => relay?.once("exit", resolve));
    relay.kill("SIGTERM");
    const timer = setTimeout(() => relay?.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

beforeAll(async () => {
  cluster = await startOwnDevcluster([], { profile: "production" });
  [target, forwardProxy] = await Promise.all([startHttpTarget(), startForwardProxy()]);
  // The release as a user unpacks it: the checkout's folders (linked) and dist/ as built.
  work = unpackRelease(
    "kubefn-cloudflare-page-",
    ["package.json", "node_modules", "scripts", "functions", "shared", "infra", "examples", "cli"],
    (dir) => ({ kubefn: kubefnCli(dir) }),
  );
  await release({ out: join(work.path, "dist") });
}, 180_000);

afterAll(async () => {
  if (sweeping) clearInterval(sweeping);
  await stopRelay();
  await harness?.close();
  await target?.close();
  await forwardProxy?.close();
  await cluster?.close();
  work?.remove();
}, 120_000);

describe("docs/deploying/cloudflare.md from dist/, literally, against a private API server", () => {
  const marker = "set env deployment/kubefn-relay KUBEFN_TUNNEL_URL";
  const secrets: Record<string, string> = {};

  it("the install, the queues, the secrets and the deploy", async () => {
    const commands = commandsOf(marker);
    const toml = readFileSync(join(work.path, "dist/cloudflare/wrangler.toml"), "utf8");
    let deployed = false;
    for (const command of commands.map(withAccount)) {
      const queue = /^wrangler queues create (\S+)$/.exec(command);
      const secret = /^(.+) \| wrangler secret put (\w+) --config dist\/cloudflare\/wrangler\.toml$/.exec(
        command,
      );
      const deploy =
        /^wrangler deploy --config (dist\/cloudflare\/wrangler\.toml)((?: --var \w+:\S+)*)$/.exec(command);
      if (command.startsWith("kubefn install")) {
        const out = await sh(command);
        expect(out.stdout, out.stdout).toContain("wrangler secret put RELAY_SECRET");
      } else if (queue) {
        // workerd makes the queues the Worker binds: it must bind this one.
        expect(toml).toMatch(new RegExp(`^(queue|dead_letter_queue) = "${queue[1]}"$`, "m"));
      } else if (secret) {
        const value = (await sh(secret[1]!)).stdout;
        expect(value.length, secret[2]).toBeGreaterThan(16);
        secrets[secret[2]!] = value;
      } else if (deploy) {
        const vars = Object.fromEntries(
          [...deploy[2]!.matchAll(/--var (\w+):(\S+)/g)].map((v) => [v[1]!, v[2]!]),
        );
        expect(vars).toEqual({ KUBE_VIA: "relay", KUBE_SERVER: "https://kubernetes.default.svc" });
        harness = createTestHarness({
          root: work.path,
          workers: [
            {
              configPath: deploy[1]!,
              vars: { ...vars, PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS },
              secrets,
            },
          ],
        });
        workerUrl = (await harness.listen()).url;
        deployed = true;
        // Cloudflare's cron trigger runs the sweep every minute; here every few seconds.
        sweeping = setInterval(() => {
          harness
            ?.getWorker()
            .scheduled({ cron: "* * * * *", scheduledTime: new Date() })
            .then((r) => {
              if (r.outcome !== "ok") sweepFailures.push(r.outcome);
            })
            .catch(() => {});
        }, 5000);
      } else if (command.startsWith("kubectl ")) {
        await sh(command);
      } else {
        throw new Error(`a command of the page this test does not know how to run: ${command}`);
      }
    }
    expect(deployed).toBe(true);
    expect(Object.keys(secrets).sort()).toEqual(["KUBE_TOKEN", "RELAY_SECRET"]);
    // The token the page makes is capped at an hour on this cluster, as on many.
    const claims = JSON.parse(
      Buffer.from(secrets.KUBE_TOKEN!.split(".")[1]!, "base64url").toString("utf8"),
    ) as { iat: number; exp: number; sub: string };
    expect(claims.sub).toBe("system:serviceaccount:kubefn-system:kubefn");
    expect(claims.exp - claims.iat).toBe(3600);
  }, 120_000);

  it("the relay, as its Deployment now says, opens the tunnel to the Worker", async () => {
    relay = await startRelayAsDeployed();
    expect(relayLog).toContain("tunnel open");
  }, 90_000);

  it("the allow-list the page names admits the Site's components", async () => {
    for (const command of commandsOf("kubefn-site-images")) await sh(command);
    expect(await walk.machinaImage()).toBe("ghcr.io/unbounded-cloud/machina:latest");
  });

  it("the examples' Proxy, SubPool and Site become Ready, reconciled by the Worker through the tunnel", async () => {
    await walk.applyExamples(target, forwardProxy);
    await eventually(
      "Proxy, SubPool and Site Ready",
      async () => {
        const got = await walk.examplesReady();
        if (got.every((s) => s === "True")) return got;
        // Not yet: look again in a second (each look is three kubectl processes).
        await new Promise((r) => setTimeout(r, 1000));
        const conditions = await kubectl(
          "get",
          "proxies,subpools,sites",
          "-A",
          "-o",
          "jsonpath={range .items[*]}{.kind} {.status.conditions}{'\\n'}{end}",
        );
        const warnings = (harness?.getLogs() ?? [])
          .map((l) => l.message)
          .filter((l) => /"level":"(warn|error)"/.test(l))
          .slice(-5);
        throw new Error(`${got.join(",")}\n${conditions}\n${warnings.join("\n")}`);
      },
      150_000,
    );
    expect(forwardProxy.requests.length).toBeGreaterThan(0);
    // Written by the Worker, as kubefn's ServiceAccount: nothing else reconciles on this cluster.
    const fields = JSON.parse(
      await kubectl("get", "proxy", "local", "-n", "default", "-o", "jsonpath={.metadata.managedFields}"),
    ) as Array<{ manager?: string; subresource?: string }>;
    expect(fields.some((f) => f.manager === "kubefn" && f.subresource === "status")).toBe(true);
    expect(sweepFailures).toEqual([]);
  }, 180_000);

  it("kubefn uninstall, while the Worker runs, leaves nothing of kubefn; then wrangler delete", async () => {
    const m = /`(kubefn uninstall)` while the Worker still runs, then\s+`wrangler delete`/.exec(walk.text);
    expect(m, "the page says how to remove kubefn").not.toBeNull();
    const out = await sh(m![1]!);
    const lines = out.stdout.trim().split("\n");
    expect(lines).toEqual(
      expect.arrayContaining([
        "deleted   Proxy default/local",
        "deleted   Site lab",
        "deleted   SubPool demo-pool",
      ]),
    );
    expect(lines).toContain("deleted   Deployment kubefn-system/kubefn-relay");
    expect(lines.at(-1)).toMatch(/^nothing of kubefn is left: \d+ objects removed$/);
    expect(await walk.kubefnLeft()).toEqual([]);
    // The relay's Pod went with its Deployment; the Worker with `wrangler delete`.
    await stopRelay();
    if (sweeping) clearInterval(sweeping);
    sweeping = undefined;
    await harness?.close();
    harness = undefined;
  }, 150_000);
});
