/**
 * A devcluster of a test's own, for a file that needs API server flags the shared one does not
 * have (an authentication webhook, an authentication configuration): `--apiserver-arg` per flag;
 * or one shaped like production (`profile: "production"`: the API server alone over TLS with a
 * private CA, no pass-through, the documented audit webhook flags, ServiceAccount tokens of at
 * most an hour). About ten seconds to start; `close()` stops it and removes its data.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { inject } from "vitest";
import { parse as parseYaml } from "yaml";

export interface OwnDevcluster {
  /** https://127.0.0.1:N */
  server: string;
  /**
   * http://127.0.0.1:M: plain-HTTP pass-through (Authorization passed on), for fetch transports;
   * "" on the production profile, which has none.
   */
  httpProxy: string;
  /** "fast" or "production", as the devcluster reports it. */
  profile: string;
  /** The admin kubeconfig's path. */
  kubeconfig: string;
  /** base64 PEM of the cluster CA, as a kubeconfig's `certificate-authority-data`. */
  caData: string;
  adminToken: string;
  close(): Promise<void>;
}

/** How an own devcluster differs from the shared one besides its API server flags. */
export interface OwnDevclusterOptions {
  /** `--profile`: "fast" (the default) or "production". */
  profile?: "fast" | "production";
  /** The audit webhook: its URL, bearer token and policy file (`--audit-webhook-*`, `--audit-policy`). */
  auditWebhook?: { url: string; token: string; policy: string };
}

/**
 * A port the devcluster picked (free when it looked) was taken by another process before its API
 * server or etcd bound it: other devclusters start at the same time in the suite's other lane.
 */
const portTaken = /bind: address already in use/;

/**
 * Starts a devcluster whose API server also gets `apiserverArgs` (each `--name=value`); a start
 * that lost a port race to another process is tried again, twice at most.
 */
export async function startOwnDevcluster(
  apiserverArgs: string[],
  options: OwnDevclusterOptions = {},
): Promise<OwnDevcluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(apiserverArgs, options);
    } catch (err) {
      if (attempt === 3 || !portTaken.test(String(err))) throw err;
    }
  }
}

async function startOnce(apiserverArgs: string[], options: OwnDevclusterOptions): Promise<OwnDevcluster> {
  const { profile, auditWebhook } = options;
  const child = spawn(
    inject("devclusterBin"),
    [
      "--exit-with-parent",
      ...(profile ? [`--profile=${profile}`] : []),
      ...(auditWebhook
        ? [
            `--audit-webhook-url=${auditWebhook.url}`,
            `--audit-webhook-token=${auditWebhook.token}`,
            `--audit-policy=${auditWebhook.policy}`,
          ]
        : []),
      ...apiserverArgs.map((a) => `--apiserver-arg=${a}`),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let tail = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    tail = (tail + c).slice(-4000);
  });
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const ready = await new Promise<{
      kubeconfig: string;
      server: string;
      httpProxy: string;
      profile?: string;
    }>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`devcluster not ready in 120 s:\n${tail}`)), 120_000);
      child.stdout?.setEncoding("utf8").on("data", (c: string) => {
        out += c;
        const line = out
          .split("\n")
          .find((l, i, all) => l.startsWith("devcluster ready ") && i < all.length - 1);
        if (!line) return;
        clearTimeout(timer);
        resolve(JSON.parse(line.slice("devcluster ready ".length)));
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`devcluster exited (${code}):\n${tail}`));
      });
    });
    const kc = parseYaml(readFileSync(ready.kubeconfig, "utf8")) as {
      clusters: Array<{ cluster: { "certificate-authority-data": string } }>;
      users: Array<{ user: { token: string } }>;
    };
    return {
      server: ready.server,
      httpProxy: ready.httpProxy,
      profile: ready.profile ?? "fast",
      kubeconfig: ready.kubeconfig,
      caData: kc.clusters[0]?.cluster["certificate-authority-data"] ?? "",
      adminToken: kc.users[0]?.user.token ?? "",
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
