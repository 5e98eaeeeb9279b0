import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** What the devcluster prints on its ready line. */
export interface DevclusterInfo {
  kubeconfig: string;
  server: string;
  httpProxy: string;
  version: string;
  dataDir: string;
}

export interface Devcluster {
  info: DevclusterInfo;
  process: ChildProcess;
  /** SIGTERM, then wait for a clean exit. */
  stop(): Promise<void>;
}

export interface DevclusterOptions {
  /** The API server posts audit EventLists here with `auditWebhookToken`. */
  auditWebhookUrl?: string;
  auditWebhookToken?: string;
  readyTimeoutMs?: number;
  /**
   * `production`: the API server alone over TLS, the documented audit webhook flags (30 s batch
   * wait), ServiceAccount tokens of at most an hour (infra/devcluster/README.md); default `fast`.
   */
  profile?: "fast" | "production";
  /** More kube-apiserver flags, each `--name=value` (an authentication webhook, say). */
  apiserverArgs?: readonly string[];
  /** Where the binary's stderr goes (its own logs); default: kept in a bounded tail for errors. */
  onStderr?: (chunk: string) => void;
}

export const devclusterBinary = fileURLToPath(
  new URL("../../../infra/devcluster/bin/devcluster", import.meta.url),
);

const READY_PREFIX = "devcluster ready ";

/**
 * Starts `infra/devcluster` (a real kube-apiserver, etcd and controllers in one process) and
 * resolves with its ready line once it serves.
 *
 * @example
 * const dc = await startDevcluster({ auditWebhookUrl: "http://127.0.0.1:8080/v1/events", auditWebhookToken });
 * console.log(dc.info.kubeconfig);
 * await dc.stop();
 */
export async function startDevcluster(opts: DevclusterOptions = {}): Promise<Devcluster> {
  if (!existsSync(devclusterBinary)) {
    throw new Error(`${devclusterBinary} is missing: run \`npm run build:devcluster\` (needs Go ≥ 1.24)`);
  }
  const args: string[] = [];
  if (opts.profile) args.push("--profile", opts.profile);
  if (opts.auditWebhookUrl) args.push("--audit-webhook-url", opts.auditWebhookUrl);
  if (opts.auditWebhookToken) args.push("--audit-webhook-token", opts.auditWebhookToken);
  for (const a of opts.apiserverArgs ?? []) args.push(`--apiserver-arg=${a}`);
  const child = spawn(devclusterBinary, args, { stdio: ["ignore", "pipe", "pipe"] });
  let tail = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    tail = (tail + chunk).slice(-4000);
    opts.onStderr?.(chunk);
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const info = await new Promise<DevclusterInfo>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      reject(
        new Error(`devcluster not ready after ${opts.readyTimeoutMs ?? 180_000} ms; stderr tail:\n${tail}`),
      );
    }, opts.readyTimeoutMs ?? 180_000);
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const line = out.split("\n").find((l) => l.startsWith(READY_PREFIX));
      if (!line) return;
      clearTimeout(timer);
      resolve(JSON.parse(line.slice(READY_PREFIX.length)) as DevclusterInfo);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`devcluster exited with ${code} before it was ready; stderr tail:\n${tail}`));
    });
  });

  return {
    info,
    process: child,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
