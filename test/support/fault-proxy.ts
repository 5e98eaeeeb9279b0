/**
 * A fault-injecting plain-HTTP pass-through for the Kubernetes API, to put in front of the
 * devcluster's `httpProxy` (credentials pass through unchanged, like the devcluster's own proxy).
 * Tests configure it at runtime, programmatically (`configure`) or over HTTP
 * (`PUT /__faults` with a {@link FaultPlan} as JSON; `GET /__faults` returns the stats), so a
 * Worker in workerd and a Node host in a child process can be faulted mid-run.
 *
 * The faults, each chosen per request with the plan's `rate` and `mix` weights:
 *
 * | fault | what the client sees | reaches etcd? |
 * | --- | --- | --- |
 * | `500`, `503`, `504` | that status with a `metav1.Status` body (`503` carries Retry-After) | no |
 * | `429` | 429 TooManyRequests with `Retry-After: plan.retryAfterSeconds` | no |
 * | `reset` | the upstream's headers and half its body, then the connection is reset | yes |
 * | `slow` | nothing for `plan.slowMs`, then the upstream's answer (a client with a shorter deadline gives up) | yes, after the delay |
 * | `lost` | the request is forwarded and answered upstream, then the connection is reset | yes |
 *
 * `reset` and `lost` on a write are the "write succeeded, response lost" case: the object is
 * written, the client only knows the connection dropped. `onForwarded` (programmatic only) sees
 * every forwarded request with the upstream's status before the client does, and may kill the
 * client's process there — "kill right after this write".
 *
 * Caveats: the choice is random but seeded (`plan.seed`), so a run is repeatable for one request
 * order; concurrent clients still interleave differently each run. Requests under `/__faults`
 * are never forwarded. Watches are passed through unfaulted (`?watch=` requests).
 *
 * @example
 * const faults = await startFaultProxy(clusterInfo().httpProxy);
 * faults.configure({ rate: 0.2, mix: { 503: 1, lost: 1 }, methods: ["POST", "PATCH"] });
 * ... point a client at faults.url ...
 * expect(faults.stats().faulted).toBeGreaterThan(0);
 * await faults.close();
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { forwardRequest, passThrough } from "./pass-through.ts";

export const faultKinds = ["500", "503", "504", "429", "reset", "slow", "lost"] as const;
export type FaultKind = (typeof faultKinds)[number];

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** What to fault, as data. The default plan faults nothing. */
export interface FaultPlan {
  /** Share of matching requests faulted, in [0, 1]. */
  rate: number;
  /** Relative weight of each fault kind; kinds left out are never chosen. Default: all equal. */
  mix?: Partial<Record<FaultKind, number>>;
  /** Only these methods are faulted (default: all). */
  methods?: Method[];
  /** Only paths matching this regular expression (source text) are faulted (default: all). */
  pathPattern?: string;
  /** Retry-After sent with 429 and 503, in seconds. Default 1. */
  retryAfterSeconds?: number;
  /** How long a `slow` answer is held, in ms. Default 2000. */
  slowMs?: number;
  /** Seed of the choice; the same seed and request order give the same faults. Default 1. */
  seed?: number;
}

/** One request the proxy saw. */
export interface SeenRequest {
  at: number;
  method: string;
  path: string;
  /** The fault applied, if any. */
  fault?: FaultKind;
  /** The upstream's status when the request was forwarded; undefined when it was not. */
  upstreamStatus?: number;
}

export interface FaultStats {
  /** Requests received (control requests excluded). */
  requests: number;
  /** GET requests received. */
  reads: number;
  /** Non-GET requests received. */
  writes: number;
  /** Requests forwarded upstream (all but the status faults). */
  forwarded: number;
  /** Requests that got a fault. */
  faulted: number;
  byFault: Record<FaultKind, number>;
}

/** What `onForwarded` may do with the client's connection. */
export type AfterForward = "answer" | "reset";

/** Sees a forwarded request (and its body, as text) once the upstream answered. */
export type ForwardHook = (req: SeenRequest, body: string) => AfterForward | Promise<AfterForward>;

export interface FaultProxy {
  url: string;
  configure(plan: FaultPlan): void;
  plan(): FaultPlan;
  stats(): FaultStats;
  /** Every request since the last `resetStats`, in arrival order. */
  seen(): readonly SeenRequest[];
  resetStats(): void;
  /**
   * Called once a request was forwarded and the upstream answered, before the client sees the
   * answer. Returning "reset" drops the client's connection instead (on top of any fault).
   */
  onForwarded(hook: ForwardHook | undefined): void;
  close(): Promise<void>;
}

const noFaults: FaultPlan = { rate: 0 };

/** Checks a plan that came in over HTTP; throws a message naming what is wrong. */
export function parseFaultPlan(value: unknown): FaultPlan {
  if (typeof value !== "object" || value === null) throw new Error("the plan must be a JSON object");
  const p = value as Record<string, unknown>;
  if (typeof p.rate !== "number" || !(p.rate >= 0 && p.rate <= 1))
    throw new Error("rate must be a number in [0, 1]");
  const plan: FaultPlan = { rate: p.rate };
  if (p.mix !== undefined) {
    if (typeof p.mix !== "object" || p.mix === null) throw new Error("mix must be an object");
    const mix: Partial<Record<FaultKind, number>> = {};
    for (const [kind, weight] of Object.entries(p.mix)) {
      if (!(faultKinds as readonly string[]).includes(kind)) throw new Error(`unknown fault kind ${kind}`);
      if (typeof weight !== "number" || !(weight >= 0)) throw new Error(`weight of ${kind} must be ≥ 0`);
      mix[kind as FaultKind] = weight;
    }
    plan.mix = mix;
  }
  if (p.methods !== undefined) {
    if (
      !Array.isArray(p.methods) ||
      !p.methods.every((m) => ["GET", "POST", "PUT", "PATCH", "DELETE"].includes(m))
    )
      throw new Error("methods must be a list of GET, POST, PUT, PATCH, DELETE");
    plan.methods = p.methods as Method[];
  }
  if (p.pathPattern !== undefined) {
    if (typeof p.pathPattern !== "string") throw new Error("pathPattern must be a string");
    new RegExp(p.pathPattern);
    plan.pathPattern = p.pathPattern;
  }
  for (const field of ["retryAfterSeconds", "slowMs", "seed"] as const) {
    const v = p[field];
    if (v === undefined) continue;
    if (typeof v !== "number" || !(v >= 0)) throw new Error(`${field} must be a number ≥ 0`);
    plan[field] = v;
  }
  return plan;
}

/** mulberry32: a small seeded PRNG, so a plan's faults are repeatable. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The fault for one request under `plan`, or undefined (pure given `random`). */
export function chooseFault(
  plan: FaultPlan,
  method: string,
  path: string,
  random: () => number,
): FaultKind | undefined {
  if (plan.rate <= 0) return undefined;
  if (plan.methods && !plan.methods.includes(method as Method)) return undefined;
  if (plan.pathPattern && !new RegExp(plan.pathPattern).test(path)) return undefined;
  if (random() >= plan.rate) return undefined;
  const weights = faultKinds.map((k) => (plan.mix ? (plan.mix[k] ?? 0) : 1));
  const total = weights.reduce((a, b) => a + b, 0);
  if (total <= 0) return undefined;
  let r = random() * total;
  for (let i = 0; i < faultKinds.length; i++) {
    r -= weights[i] ?? 0;
    if (r < 0) return faultKinds[i];
  }
  return faultKinds[faultKinds.length - 1];
}

function emptyByFault(): Record<FaultKind, number> {
  return Object.fromEntries(faultKinds.map((k) => [k, 0])) as Record<FaultKind, number>;
}

const statusReason: Record<"500" | "503" | "504" | "429", string> = {
  "500": "InternalError",
  "503": "ServiceUnavailable",
  "504": "Timeout",
  "429": "TooManyRequests",
};

function answerStatus(res: ServerResponse, kind: "500" | "503" | "504" | "429", retryAfter: number): void {
  const code = Number(kind);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (kind === "429" || kind === "503") headers["retry-after"] = String(retryAfter);
  res.writeHead(code, headers);
  res.end(
    JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      message: `injected fault ${kind}`,
      reason: statusReason[kind],
      code,
      ...(kind === "429" || kind === "503" ? { details: { retryAfterSeconds: retryAfter } } : {}),
    }),
  );
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

interface Upstream {
  status: number;
  headers: IncomingMessage["headers"];
  body: Buffer;
}

function forward(target: URL, req: IncomingMessage, body: Buffer): Promise<Upstream> {
  return new Promise((resolve, reject) => {
    const up = forwardRequest(target, req, body, (r) => {
      const chunks: Buffer[] = [];
      r.on("data", (c: Buffer) => chunks.push(c));
      r.on("end", () =>
        resolve({ status: r.statusCode ?? 502, headers: r.headers, body: Buffer.concat(chunks) }),
      );
      r.on("error", reject);
    });
    up.on("error", reject);
  });
}

/** Response headers fit to resend with a fully buffered body. */
function resendHeaders(headers: IncomingMessage["headers"], length: number): IncomingMessage["headers"] {
  const out = { ...headers, "content-length": String(length) };
  delete out["transfer-encoding"];
  delete out.connection;
  return out;
}

/**
 * Starts the proxy on a free loopback port, forwarding to `upstream` (an http:// URL such as the
 * devcluster's `httpProxy`). It starts with no faults.
 */
export async function startFaultProxy(upstream: string, initial: FaultPlan = noFaults): Promise<FaultProxy> {
  const target = new URL(upstream);
  let plan = initial;
  let random = seededRandom(plan.seed ?? 1);
  let seen: SeenRequest[] = [];
  let byFault = emptyByFault();
  let hook: ForwardHook | undefined;
  const sockets = new Set<import("node:net").Socket>();

  const configure = (next: FaultPlan) => {
    plan = next;
    random = seededRandom(next.seed ?? 1);
  };
  const stats = (): FaultStats => {
    const reads = seen.filter((s) => s.method === "GET").length;
    return {
      requests: seen.length,
      reads,
      writes: seen.length - reads,
      forwarded: seen.filter((s) => s.upstreamStatus !== undefined).length,
      faulted: seen.filter((s) => s.fault !== undefined).length,
      byFault: { ...byFault },
    };
  };

  async function control(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ plan, stats: stats() }));
      return;
    }
    if (req.method === "PUT") {
      try {
        configure(parseFaultPlan(JSON.parse((await readBody(req)).toString("utf8"))));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ plan }));
      } catch (err) {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
      }
      return;
    }
    if (req.method === "DELETE") {
      seen = [];
      byFault = emptyByFault();
      res.writeHead(204).end();
      return;
    }
    res.writeHead(405).end();
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = req.url ?? "/";
    if (path === "/__faults" || path.startsWith("/__faults?")) return control(req, res);
    const method = req.method ?? "GET";
    const entry: SeenRequest = { at: Date.now(), method, path };
    seen.push(entry);
    const watch = /[?&]watch=(true|1)/.test(path);
    const fault = watch ? undefined : chooseFault(plan, method, path, random);
    if (fault) {
      entry.fault = fault;
      byFault[fault]++;
    }
    const body = await readBody(req);
    const retryAfter = plan.retryAfterSeconds ?? 1;
    if (fault === "500" || fault === "503" || fault === "504" || fault === "429") {
      answerStatus(res, fault, retryAfter);
      return;
    }
    if (watch) {
      passThrough(target, req, body, res);
      return;
    }
    let up: Upstream;
    try {
      up = await forward(target, req, body);
    } catch (err) {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`fault proxy: upstream failed: ${String(err)}`);
      return;
    }
    entry.upstreamStatus = up.status;
    const after = hook ? await hook(entry, body.toString("utf8")) : "answer";
    if (after === "reset" || fault === "lost") {
      req.socket.resetAndDestroy();
      return;
    }
    if (fault === "reset") {
      // Headers promise the whole body; half of it arrives, then the connection drops.
      res.writeHead(up.status, resendHeaders(up.headers, up.body.length));
      res.write(up.body.subarray(0, Math.floor(up.body.length / 2)));
      setTimeout(() => req.socket.resetAndDestroy(), 10);
      return;
    }
    if (fault === "slow") await new Promise((r) => setTimeout(r, plan.slowMs ?? 2000));
    if (res.destroyed) return;
    res.writeHead(up.status, resendHeaders(up.headers, up.body.length));
    res.end(up.body);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`fault proxy: ${String(err)}`);
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    configure,
    plan: () => plan,
    stats,
    seen: () => seen,
    resetStats() {
      seen = [];
      byFault = emptyByFault();
    },
    onForwarded(next) {
      hook = next;
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
