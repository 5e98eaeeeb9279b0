/**
 * Runs the Node host (`functions/node/main.ts`) as a child process for end-to-end tests, the way
 * `npm start` does, and gives tests its log lines and URL.
 */

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { asServiceAccount, installCrdsAndRbac, serviceAccountToken } from "../../functions/node/install.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { LOOPBACK_PROBE_CIDRS } from "../support/loopback.ts";
import { tempDir } from "../support/temp-dir.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

export interface LogLine {
  time: string;
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface HostProcess {
  child: ChildProcess;
  url: string;
  lines: LogLine[];
  /** Resolves with the first log line matching `pred` (already seen or future). */
  waitFor(pred: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** SIGINT (or the given signal) and wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The Node options and environment `scripts/start.sh` runs the host with (its memory settings). */
export const hostNodeArgs = [
  "--max-semi-space-size=16",
  "--max-old-space-size=512",
  "--import",
  "tsx",
  "functions/node/main.ts",
];
export const hostProcessEnv = { MALLOC_ARENA_MAX: "2" };

/** How a host process is run: its working directory and node's arguments (options, then the script). */
export interface HostCommand {
  cwd: string;
  args: string[];
  env?: Record<string, string>;
}

/** `scripts/start.sh`'s command: main.ts through tsx, in the repository. */
export const startShCommand: HostCommand = { cwd: root, args: hostNodeArgs };

/**
 * The image's command (infra/host/Containerfile), laid out in `dir` as the image is: main.ts
 * bundled by scripts/bundle-host.sh (the Containerfile's build step) to functions/node/main.mjs,
 * infra/crds and infra/rbac beside it, package.json, the repository's node_modules (the image's
 * holds the production dependencies alone; the bundle imports nothing else), `NODE_ENV=production`,
 * and node's options of the Containerfile's ENTRYPOINT.
 */
export async function imageCommand(dir: string): Promise<HostCommand> {
  await promisify(execFile)(
    "bash",
    [join(root, "scripts/bundle-host.sh"), join(dir, "functions/node/main.mjs")],
    {
      cwd: root,
    },
  );
  mkdirSync(join(dir, "infra"), { recursive: true });
  for (const d of ["infra/crds", "infra/rbac", "node_modules"]) symlinkSync(join(root, d), join(dir, d));
  copyFileSync(join(root, "package.json"), join(dir, "package.json"));
  return { cwd: dir, args: imageEntrypoint().slice(1), env: { NODE_ENV: "production" } };
}

/** infra/host/Containerfile's ENTRYPOINT: `["node", …options, "functions/node/main.mjs"]`. */
export function imageEntrypoint(): string[] {
  const containerfile = readFileSync(join(root, "infra/host/Containerfile"), "utf8");
  const entry = /^ENTRYPOINT (\[.*\])$/m.exec(containerfile)?.[1];
  if (!entry) throw new Error("infra/host/Containerfile has no ENTRYPOINT [..] line");
  return JSON.parse(entry) as string[];
}

/** Starts the host with `env` (JSON logs) and waits for its "listening" line. */
export async function startHost(
  env: Record<string, string>,
  readyTimeoutMs = 180_000,
  /** Node options after the command's, which they override (a bench's variant). */
  extraNodeArgs: readonly string[] = [],
  /** `scripts/start.sh`'s by default; {@link imageCommand} runs the image's. */
  command: HostCommand = startShCommand,
): Promise<HostProcess> {
  const args = [...command.args.slice(0, -1), ...extraNodeArgs, command.args.at(-1)!];
  return spawnHost({ ...command.env, ...env }, { ...command, args }, false).ready(readyTimeoutMs);
}

/**
 * A host spawned with `env` but held before it starts: its modules load now, in the background,
 * and `start()` runs `functions/node/main.ts` in that process (test/e2e/standby-host.ts) and
 * waits for its "listening" line — a restart without the ~2 s of loading, for tests that kill
 * and restart the host many times. `discard()` ends a standby that is not needed.
 */
export interface StandbyHost {
  start(readyTimeoutMs?: number): Promise<HostProcess>;
  discard(): void;
}

export function spawnStandbyHost(env: Record<string, string>): StandbyHost {
  // scripts/start.sh's options, with the standby entry point in place of main.ts.
  const args = [...hostNodeArgs.slice(0, -1), "test/e2e/standby-host.ts"];
  const spawned = spawnHost(env, { cwd: root, args }, true);
  return {
    start(readyTimeoutMs = 180_000) {
      spawned.child.stdin?.end("start\n");
      return spawned.ready(readyTimeoutMs);
    },
    discard() {
      if (spawned.child.exitCode === null && spawned.child.signalCode === null) spawned.child.kill("SIGKILL");
    },
  };
}

function spawnHost(
  env: Record<string, string>,
  command: HostCommand,
  standby: boolean,
): { child: ChildProcess; ready(timeoutMs: number): Promise<HostProcess> } {
  const child = spawn(process.execPath, command.args, {
    cwd: command.cwd,
    env: {
      ...hostProcessEnv,
      ...process.env,
      KUBECONFIG: "",
      // A test runner in a Pod would otherwise send every host to that Pod's cluster.
      KUBERNETES_SERVICE_HOST: "",
      KUBEFN_PORT: "0",
      KUBEFN_LOG_FORMAT: "json",
      // The fixtures are loopback; a host with KUBECONFIG admits no internal destination by default.
      PROBE_ALLOWED_CIDRS: LOOPBACK_PROBE_CIDRS,
      ...env,
    },
    stdio: [standby ? "pipe" : "ignore", "pipe", "pipe"],
  });
  const lines: LogLine[] = [];
  const waiters: Array<{ pred: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  let buffer = "";
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr = (stderr + c).slice(-4000);
  });
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    buffer += chunk;
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const raw = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf("\n");
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        continue;
      }
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.pred(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stdin?.on("error", () => undefined);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const waitFor = (pred: (l: LogLine) => boolean, timeoutMs = 60_000) =>
    new Promise<LogLine>((resolve, reject) => {
      const seen = lines.find(pred);
      if (seen) return resolve(seen);
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(entry), 1);
        reject(new Error(`host log line not seen in ${timeoutMs} ms; stderr tail:\n${stderr}`));
      }, timeoutMs);
      const entry = {
        pred,
        resolve: (l: LogLine) => {
          clearTimeout(timer);
          resolve(l);
        },
      };
      waiters.push(entry);
      void exited.then((code) => {
        if (!waiters.includes(entry)) return;
        clearTimeout(timer);
        reject(new Error(`host exited (${code}) before the line appeared; stderr tail:\n${stderr}`));
      });
    });

  return {
    child,
    async ready(readyTimeoutMs) {
      const listening = await waitFor((l) => l.msg === "listening", readyTimeoutMs);
      return {
        child,
        url: String(listening.url),
        lines,
        waitFor,
        async stop(signal: NodeJS.Signals = "SIGINT") {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      };
    },
  };
}

/**
 * Installs CRDs and RBAC into the cluster of `adminKubeconfig` and writes a kubeconfig for the
 * least-privileged `kubefn-system/kubefn` ServiceAccount, as the host runs in production.
 */
export async function functionsKubeconfig(adminKubeconfig: string, via?: string): Promise<string> {
  const admin = new KubeConfig();
  admin.loadFromFile(adminKubeconfig);
  await installCrdsAndRbac(createKube(createNodeTransport(admin)));
  const token = await serviceAccountToken(createNodeTransport(admin), "kubefn-system", "kubefn");
  const kc = via ? new KubeConfig() : asServiceAccount(admin, token);
  // `via`: a plain-HTTP pass-through to the API server (client-node wants skipTLSVerify for it).
  if (via)
    kc.loadFromOptions({
      clusters: [{ name: "via", server: via, skipTLSVerify: true }],
      users: [{ name: "kubefn", token }],
      contexts: [{ name: "kubefn", cluster: "via", user: "kubefn" }],
      currentContext: "kubefn",
    });
  // A ServiceAccount token: removed with the test run's temporary root, or at the bench's exit.
  const file = join(tempDir("kubefn-e2e-").path, "kubeconfig");
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/**
 * Polls `fn` until it returns a value, for up to `timeoutMs`. Errors count as "not yet" (an
 * object may not exist yet) and the last one is reported on timeout.
 */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
