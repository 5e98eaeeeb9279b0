/**
 * Test and bench fixtures for the probers: a real HTTP forward proxy (absolute-form GET and
 * CONNECT) and real HTTP/HTTPS targets on 127.0.0.1 with random ports. Node-only; never imported
 * by production code.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Client connections of one or more forward proxies: accepted, open now, and the most open at once. */
export interface ConnectionGauge {
  accepted: number;
  open: number;
  peak: number;
}

export interface ForwardProxy {
  port: number;
  /** Client connections accepted. */
  connections: number;
  /** Client connections open now, and the most open at once since start (or `resetPeak`). */
  open: number;
  peak: number;
  /** Starts a new peak from the connections open now. */
  resetPeak(): void;
  /** CONNECT requests seen, with their authority (empty when started with `record: false`). */
  connects: string[];
  /** Absolute-form requests seen, the request target as sent (empty with `record: false`). */
  requests: string[];
  close(): Promise<void>;
}

export interface ForwardProxyOptions extends ListenAt {
  /**
   * Keep every request target in `requests` and `connects` (default true). A bench probing
   * thousands of Proxies a minute for many minutes turns it off and reads the counters.
   */
  record?: boolean;
  /** A gauge shared with other proxies (see `startForwardProxies`), counted besides this one's. */
  shared?: ConnectionGauge;
}

/** A minimal forward proxy: what squid or tinyproxy do for a probe, nothing more. */
export async function startForwardProxy(opts: ForwardProxyOptions = {}): Promise<ForwardProxy> {
  const record = opts.record ?? true;
  const own: ConnectionGauge = { accepted: 0, open: 0, peak: 0 };
  const gauges = opts.shared ? [own, opts.shared] : [own];
  const sockets = new Set<net.Socket>();
  const connects: string[] = [];
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    if (record) requests.push(req.url ?? "");
    let target: URL;
    try {
      target = new URL(req.url ?? "");
    } catch {
      res.writeHead(400).end("absolute-form required");
      return;
    }
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port || 80,
        path: `${target.pathname}${target.search}`,
        method: req.method,
        headers: { ...req.headers, connection: "close" },
        agent: false,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  server.on("connection", (socket: net.Socket) => {
    for (const g of gauges) {
      g.accepted++;
      g.open++;
      g.peak = Math.max(g.peak, g.open);
    }
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      for (const g of gauges) g.open--;
    });
  });
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    if (record) connects.push(req.url ?? "");
    const [host, port] = splitAuthority(req.url ?? "");
    const upstream = net.connect(port, host, () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    const destroyBoth = () => {
      upstream.destroy();
      client.destroy();
    };
    upstream.on("error", () => {
      client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
    });
    client.on("error", destroyBoth);
    upstream.on("close", () => client.destroy());
    client.on("close", () => upstream.destroy());
  });
  const port = await listen(server, opts);
  return {
    port,
    get connections() {
      return own.accepted;
    },
    get open() {
      return own.open;
    },
    get peak() {
      return own.peak;
    },
    resetPeak: () => {
      own.peak = own.open;
    },
    connects,
    requests,
    close: () => closeServer(server, sockets),
  };
}

/** `count` forward proxies whose client connections are also counted together. */
export interface ForwardProxies {
  proxies: ForwardProxy[];
  ports: number[];
  /** Connections of all of them: accepted, open now, most open at once (since `resetPeak`). */
  accepted: number;
  open: number;
  peak: number;
  resetPeak(): void;
  close(): Promise<void>;
}

export async function startForwardProxies(
  count: number,
  opts: Omit<ForwardProxyOptions, "shared" | "port"> = {},
): Promise<ForwardProxies> {
  const total: ConnectionGauge = { accepted: 0, open: 0, peak: 0 };
  const proxies = await Promise.all(
    Array.from({ length: count }, () => startForwardProxy({ ...opts, shared: total })),
  );
  return {
    proxies,
    ports: proxies.map((p) => p.port),
    get accepted() {
      return total.accepted;
    },
    get open() {
      return total.open;
    },
    get peak() {
      return total.peak;
    },
    resetPeak: () => {
      total.peak = total.open;
      for (const p of proxies) p.resetPeak();
    },
    close: async () => {
      await Promise.all(proxies.map((p) => p.close()));
    },
  };
}

function splitAuthority(authority: string): [string, number] {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(authority);
  return m ? [m[1]!, Number(m[2])] : [authority, 443];
}

export interface Target {
  port: number;
  hits: number;
  close(): Promise<void>;
}

/** An HTTP target answering `status` (or hanging forever when `hang`). */
export async function startHttpTarget(
  opts: { status?: number; hang?: boolean } & ListenAt = {},
): Promise<Target> {
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => {
    state.hits++;
    if (opts.hang) return;
    res.writeHead(opts.status ?? 200, { "content-type": "text/plain" }).end("ok\n");
  });
  trackSockets(server, sockets);
  const port = await listen(server, opts);
  const state: Target = { port, hits: 0, close: () => closeServer(server, sockets) };
  return state;
}

export interface TlsMaterial {
  cert: string;
  key: string;
}

/** A self-signed certificate for 127.0.0.1 and localhost, made with the openssl CLI. */
export function makeSelfSignedCert(): TlsMaterial {
  const dir = mkdtempSync(join(tmpdir(), "kubefn-health-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=kubefn-health-test",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "ignore" },
    );
    return {
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
      key: readFileSync(join(dir, "key.pem"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** An HTTPS target with the given certificate. */
export async function startHttpsTarget(
  tls: TlsMaterial,
  opts: { status?: number } & ListenAt = {},
): Promise<Target> {
  const sockets = new Set<net.Socket>();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
    state.hits++;
    res.writeHead(opts.status ?? 200).end("ok\n");
  });
  trackSockets(server, sockets);
  const port = await listen(server, opts);
  const state: Target = { port, hits: 0, close: () => closeServer(server, sockets) };
  return state;
}

/** A port on 127.0.0.1 where nothing listens (bound, then released). */
export async function unusedPort(): Promise<number> {
  const server = net.createServer();
  const port = await listen(server);
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function trackSockets(server: net.Server, sockets: Set<net.Socket>): void {
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
}

/** Where a fixture server listens; default 127.0.0.1 on a free port. */
export interface ListenAt {
  host?: string;
  port?: number;
}

function listen(server: net.Server, at: ListenAt = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(at.port ?? 0, at.host ?? "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : 0);
    });
  });
}

function closeServer(server: net.Server, sockets: Set<net.Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
}
