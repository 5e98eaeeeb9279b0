/**
 * What the Node host's transport to the API server costs, measured from outside the host for the
 * fleet bench's transport comparison (`KUBEFN_BENCH_FLEET_TRANSPORTS`):
 *
 * - connections: the host's established TCP connections to the API server's port, sampled every
 *   second from /proc (its fds' socket inodes in /proc/<pid>/net/tcp{,6}): the most open at once
 *   and how many different ones a phase used;
 * - request times: each request from its creation to its response's last byte, recorded in the host
 *   by test/bench/kube-timing.mjs through node:http's and undici's diagnostics channels;
 * - CPU per pass and per sweep: the host's CPU time (user + system) in a phase over the passes
 *   (and, in the steady window, the sweeps) it ran.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { NodeTransportHttp } from "../../shared/kube/node.ts";
import { round } from "./cluster.ts";

export interface PhaseFigures {
  seconds: number;
  requests: number;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Most connections to the API server open at once (sampled each second). */
  maxConnections: number;
  /** Different connections seen in the phase (a new one per reconnect). */
  connectionsUsed: number;
  cpuSeconds: number;
  passes: number;
  cpuMsPerPass: number | null;
}

export interface TransportFigures {
  transport: NodeTransportHttp;
  converge: PhaseFigures;
  steady: PhaseFigures & { sweeps: number; cpuMsPerSweep: number | null };
}

interface PhaseInput {
  from: number;
  to: number;
  cpuSeconds: number;
  passes: number;
}

export interface TransportProbe {
  figures(
    transport: NodeTransportHttp,
    phases: { converge: PhaseInput; steady: PhaseInput & { sweeps: number } },
  ): TransportFigures;
  stop(): void;
}

export function transportProbe(pid: number, api: URL, timingFile: string): TransportProbe {
  const port = Number(api.port || (api.protocol === "https:" ? 443 : 80));
  const samples: { at: number; inodes: string[] }[] = [];
  const timer = setInterval(() => samples.push({ at: Date.now(), inodes: apiSockets(pid, port) }), 1000);
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    figures(transport, phases) {
      const times = readTimings(timingFile);
      const phase = (p: PhaseInput): PhaseFigures => {
        const inPhase = samples.filter((s) => s.at >= p.from && s.at < p.to);
        const durations = times
          .filter((t) => t.at >= p.from && t.at < p.to)
          .map((t) => t.ms)
          .sort((a, b) => a - b);
        return {
          seconds: round((p.to - p.from) / 1000, 1),
          requests: durations.length,
          p50Ms: quantile(durations, 0.5),
          p99Ms: quantile(durations, 0.99),
          maxConnections: Math.max(0, ...inPhase.map((s) => s.inodes.length)),
          connectionsUsed: new Set(inPhase.flatMap((s) => s.inodes)).size,
          cpuSeconds: round(p.cpuSeconds, 2),
          passes: p.passes,
          cpuMsPerPass: p.passes > 0 ? round((p.cpuSeconds * 1000) / p.passes, 2) : null,
        };
      };
      const steady = phase(phases.steady);
      return {
        transport,
        converge: phase(phases.converge),
        steady: {
          ...steady,
          sweeps: phases.steady.sweeps,
          cpuMsPerSweep:
            phases.steady.sweeps > 0
              ? round((phases.steady.cpuSeconds * 1000) / phases.steady.sweeps, 0)
              : null,
        },
      };
    },
  };
}

function quantile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!, 1);
}

function readTimings(file: string): { at: number; ms: number }[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [at, ms] = l.split(" ");
      return { at: Number(at), ms: Number(ms) };
    });
}

/** Inodes of `pid`'s established TCP connections to `port`. */
function apiSockets(pid: number, port: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const mine = new Set<string>();
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) mine.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const out: string[] = [];
  for (const table of ["tcp", "tcp6"]) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // f[2] remote address:port, f[3] state (01 established), f[9] inode.
      if (f.length < 10 || f[3] !== "01" || !f[2]!.endsWith(`:${hexPort}`)) continue;
      if (mine.has(f[9]!)) out.push(f[9]!);
    }
  }
  return out;
}
