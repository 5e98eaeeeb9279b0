/**
 * Kill after every write: the Node host runs as a child process behind the fault proxy; during a
 * stage (a create, an update or a delete of a victim object) the fault proxy lets each write of
 * the victim reach the API server, then SIGKILLs the host and drops the connection, once per
 * distinct write. A new host starts as soon as the killed one is gone — from a standby process
 * that loaded the host's modules meanwhile (test/e2e/host.ts `spawnStandbyHost`) — its first sweep
 * sends every object a pass, and it carries on until the next write it has not been killed at. The stage ends
 * when the checks find nothing wrong for 3 s with one host running throughout.
 *
 * One chain of restarts covers every write a pass makes, in the order passes make them, with a
 * restart per write and no setup per write.
 */
import { type HostProcess, type StandbyHost, spawnStandbyHost } from "../e2e/host.ts";
import type { FaultProxy, SeenRequest } from "../support/fault-proxy.ts";
import { convergeAll } from "./operators.ts";

export interface KillChain {
  /** The host running now, if any. */
  host(): HostProcess | undefined;
  ensureHost(): Promise<HostProcess>;
  /** Ends the standby host (the running one is the caller's to stop). */
  close(): void;
  /**
   * Runs `act` and drives the stage to convergence with the host killed after each distinct
   * write of the victim; returns those writes in order (see {@link writeLabel}).
   */
  stage(opts: {
    isVictims: (r: SeenRequest, body: string) => boolean;
    act: () => Promise<void>;
    check: () => Promise<string[]>;
    timeoutMs?: number;
  }): Promise<string[]>;
}

const STANDBY_HOSTS = 3;

export const alive = (h: HostProcess | undefined): h is HostProcess =>
  !!h && h.child.exitCode === null && h.child.signalCode === null;

export function killChain(
  faults: FaultProxy,
  env: Record<string, string>,
  log: (line: string) => void = () => undefined,
): KillChain {
  let host: HostProcess | undefined;
  /**
   * The next hosts, loading their modules while this one runs: a restart starts the oldest and
   * skips what it has loaded. Three, since a host is often killed within a second of starting,
   * before one standby is ready on a loaded machine.
   */
  const standbys: StandbyHost[] = [];
  let starting: Promise<HostProcess> | undefined;
  /** Hosts started so far: a check that saw another count saw a restart. */
  let started = 0;
  /** Set while a killed host has not been replaced: its in-flight writes are not kill points. */
  let dying = false;
  const ensureHost = (): Promise<HostProcess> => {
    if (alive(host)) return Promise.resolve(host);
    starting ??= (async () => {
      const next = standbys.shift() ?? spawnStandbyHost(env);
      while (standbys.length < STANDBY_HOSTS) standbys.push(spawnStandbyHost(env));
      const t0 = Date.now();
      const running = await next.start();
      log(`host ${started + 1} listening after ${Date.now() - t0} ms`);
      host = running;
      started++;
      dying = false;
      return running;
    })().finally(() => {
      starting = undefined;
    });
    return starting;
  };
  return {
    host: () => host,
    ensureHost,
    close() {
      for (const standby of standbys.splice(0)) standby.discard();
    },
    async stage({ isVictims, act, check, timeoutMs = 150_000 }) {
      const killedAt: string[] = [];
      faults.onForwarded((r, body) => {
        if (dying || r.method === "GET" || (r.upstreamStatus ?? 500) >= 300) return "answer";
        if (r.path.includes("/events") || !isVictims(r, body)) return "answer";
        const write = writeLabel(r, body);
        if (killedAt.includes(write) || !alive(host)) return "answer";
        killedAt.push(write);
        log(`killed after ${write}`);
        dying = true;
        const victim = host;
        // The next host starts as soon as this one is gone, not at the next check.
        victim.child.once("exit", () => void ensureHost().catch(() => undefined));
        victim.child.kill("SIGKILL");
        return "reset";
      });
      try {
        await ensureHost();
        await act();
        let seen = started;
        await convergeAll(
          async () => {
            if (!alive(host) || seen !== started) {
              await ensureHost();
              seen = started;
              return ["host restarted"];
            }
            return check();
          },
          undefined,
          { timeoutMs, quietMs: 3000, pollMs: 250 },
          log,
          "kill chain",
        );
      } finally {
        faults.onForwarded(undefined);
      }
      return killedAt;
    },
  };
}
/**
 * A write as the chain tells writes apart: method and path, the name a POST creates, and which
 * of finalizers and annotations a metadata-only patch carries — e.g.
 * `PATCH /apis/…/subpools/x (finalizers)`, `POST /api/v1/namespaces/ns/secrets x-credentials`.
 */
export function writeLabel(r: SeenRequest, body: string): string {
  const path = r.path.split("?")[0] ?? r.path;
  let name = "";
  if (r.method === "POST") {
    try {
      name = ` ${(JSON.parse(body) as { metadata?: { name?: string } }).metadata?.name ?? ""}`;
    } catch {}
  }
  const parts = r.method === "POST" ? [] : metadataWritten(body);
  return `${r.method} ${path}${name}${parts.length > 0 ? ` (${parts.join(", ")})` : ""}`;
}

/**
 * Which of finalizers and annotations a metadata-only patch writes: a merge patch of `metadata`
 * alone, or a JSON Patch whose writing ops are all under `/metadata/` (its `test` ops write
 * nothing: a new SubPool's finalizer goes so, tested against the pool's UID).
 */
function metadataWritten(body: string): string[] {
  const fields = ["finalizers", "annotations"];
  if (/^\s*\{\s*"metadata"/.test(body)) return fields.filter((f) => body.includes(`"${f}"`));
  let ops: unknown;
  try {
    ops = JSON.parse(body);
  } catch {
    return [];
  }
  if (!Array.isArray(ops)) return [];
  const written = ops
    .filter(
      (o): o is { op: string; path: string } => typeof o?.op === "string" && typeof o?.path === "string",
    )
    .filter((o) => o.op !== "test")
    .map((o) => o.path);
  if (written.length === 0 || !written.every((p) => p.startsWith("/metadata/"))) return [];
  return fields.filter((f) => written.some((p) => p.startsWith(`/metadata/${f}`)));
}
