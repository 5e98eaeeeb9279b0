/**
 * `npm run bench -- reaction`: how long a change takes to reach kubefn, per intake path, with the
 * settings the docs give, on the production-shaped devcluster (`--profile production`).
 *
 * For each path a devcluster of its own and the Node host as the ServiceAccount (sweep every 5 s:
 * it runs the probes, so Ready here is the sweep's as much as the intake's); `samples` External Proxies applied one at a time with `kubectl apply`,
 * each timed from the apply to the host's first pass for it triggered by that intake (its log
 * line's time) and to phase
 * Ready (polled every 100 ms; Ready needs one successful probe (successThreshold 1, interval 5 s
 * here, the same for every path):
 *
 * - `audit webhook`: the API server's webhook with exactly the documented flags
 *   (`--audit-webhook-mode=batch`, the default 30 s batch wait), pointed at the host's intake;
 * - `relay`: no audit webhook; the relay process (infra/relay/main.ts, its defaults: batches of at
 *   most 1 s) watches and posts to the host.
 *
 * The applies are spaced by a random 0–5 s, so they land anywhere in the webhook's batch window.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { type Devcluster, devclusterBinary, startDevcluster } from "../../functions/node/dev/devcluster.ts";
import { functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { outputOf } from "../support/child-output.ts";
import { freePort } from "../support/oidc-issuer.ts";
import {
  type ForwardProxy,
  startForwardProxy,
  startHttpTarget,
  type Target,
} from "../support/probe-fixtures.ts";
import type { BenchRow } from "./cluster.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const samples = Number(process.env.KUBEFN_BENCH_REACTION_SAMPLES ?? "4");

type IntakePath = "audit webhook" | "relay";

interface Sample {
  firstPassMs: number;
  readyMs: number;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The devcluster's own kubectl against `dc`. */
async function kubectl(dc: Devcluster, args: string[], input?: string): Promise<string> {
  const child = spawn(devclusterBinary, ["kubectl", "--kubeconfig", dc.info.kubeconfig, ...args], {
    stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  const r = await outputOf(child, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

function proxyYaml(ns: string, name: string, proxy: ForwardProxy, target: Target): string {
  return `apiVersion: crawl.kubefn.dev/v1alpha1
kind: Proxy
metadata: { name: ${name}, namespace: ${ns} }
spec:
  mode: External
  endpoint: { host: 127.0.0.1, port: ${proxy.port}, scheme: http }
  healthCheck: { probeURL: "http://127.0.0.1:${target.port}/", intervalSeconds: 5, successThreshold: 1 }
`;
}

async function measure(path: IntakePath): Promise<Sample[]> {
  const auditToken = randomBytes(24).toString("hex");
  const relaySecret = randomBytes(24).toString("hex");
  const hostPort = await freePort();
  console.error(`  ${path}: starting a production-profile devcluster`);
  const dc = await startDevcluster({
    profile: "production",
    ...(path === "audit webhook"
      ? { auditWebhookUrl: `http://127.0.0.1:${hostPort}/v1/events`, auditWebhookToken: auditToken }
      : {}),
  });
  let host: HostProcess | undefined;
  let relay: ChildProcess | undefined;
  const [proxy, target] = await Promise.all([startForwardProxy({ record: false }), startHttpTarget()]);
  try {
    host = await startHost({
      KUBECONFIG: await functionsKubeconfig(dc.info.kubeconfig),
      KUBEFN_PORT: String(hostPort),
      // Probes run from the sweep: a short period, so Ready follows within seconds (the sweep may
      // also reconcile a new Proxy before its event arrives: the intake's pass is timed apart).
      SWEEP_PERIOD_SECONDS: "5",
      ...(path === "audit webhook"
        ? { KUBEFN_AUDIT_TOKEN: auditToken }
        : { KUBEFN_RELAY_SECRET: relaySecret }),
    });
    if (path === "relay") {
      relay = spawn(process.execPath, ["--import", "tsx", "infra/relay/main.ts"], {
        cwd: root,
        stdio: ["ignore", "pipe", "inherit"],
        env: {
          ...process.env,
          KUBECONFIG: dc.info.kubeconfig,
          KUBEFN_INTAKE_URL: `${host.url}/v1/events`,
          KUBEFN_RELAY_SECRET: relaySecret,
          KUBEFN_RELAY_PORT: String(await freePort()),
        },
      });
      await new Promise<void>((resolve, reject) => {
        let out = "";
        relay?.stdout?.setEncoding("utf8").on("data", (c: string) => {
          out += c;
          if (out.includes('"msg":"relay started"')) resolve();
        });
        relay?.once("exit", (code) => reject(new Error(`relay exited (${code})`)));
      });
      // Its first lists, before anything is applied.
      await new Promise((r) => setTimeout(r, 3000));
    }
    console.error(`  ${path}: host${relay ? " and relay" : ""} up, applying ${samples} Proxies`);
    const ns = `reaction-${randomBytes(3).toString("hex")}`;
    await kubectl(dc, ["create", "namespace", ns]);
    const out: Sample[] = [];
    for (let i = 0; i < samples; i++) {
      await new Promise((r) => setTimeout(r, Math.random() * 5000));
      const name = `p${i}`;
      const applied = Date.now();
      await kubectl(dc, ["apply", "-f", "-"], proxyYaml(ns, name, proxy, target));
      const key = `proxy/${ns}/${name}`;
      const trigger = path === "relay" ? "relay" : "audit";
      // Ready is polled from the apply on, beside the wait for the intake's pass: whichever path
      // (the intake's pass or the sweep's) gets there first.
      const ready = (async () => {
        const deadline = Date.now() + 120_000;
        for (;;) {
          if (Date.now() > deadline) throw new Error(`${key} not Ready within 120 s`);
          const phase = await kubectl(dc, ["get", "proxy", name, "-n", ns, "-o", "jsonpath={.status.phase}"]);
          if (phase === "Ready") return Date.now() - applied;
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const pass = await host.waitFor(
        (l) => l.msg === "pass" && l.key === key && l.trigger === trigger,
        120_000,
      );
      out.push({ firstPassMs: Date.parse(pass.time) - applied, readyMs: await ready });
      console.error(
        `  ${path}: ${name} first pass ${out.at(-1)?.firstPassMs} ms, Ready ${out.at(-1)?.readyMs} ms`,
      );
    }
    return out;
  } finally {
    relay?.kill("SIGTERM");
    await host?.stop();
    await Promise.all([proxy.close(), target.close()]);
    await dc.stop();
  }
}

export async function benchReaction(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const path of ["audit webhook", "relay"] as const) {
    const got = await measure(path);
    const first = got.map((s) => s.firstPassMs);
    const ready = got.map((s) => s.readyMs);
    const note = (xs: number[]) =>
      `median of ${xs.length}; ${xs.map((x) => (x / 1000).toFixed(1)).join(", ")} s`;
    rows.push(
      {
        name: `reaction ${path}: apply → first pass`,
        figure: Math.round(median(first)),
        unit: "ms",
        note: note(first),
      },
      {
        name: `reaction ${path}: apply → Ready`,
        figure: Math.round(median(ready)),
        unit: "ms",
        note: note(ready),
      },
    );
  }
  return rows;
}
