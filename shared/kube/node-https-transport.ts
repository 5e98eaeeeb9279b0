import * as http from "node:http";
import * as https from "node:https";
import type { Connection, Exchange } from "./node-transport.ts";
import type { TransportResponse } from "./port.ts";

/**
 * The Node transport's connection before undici: a `node:https` keep-alive agent (Node pools its
 * sockets by TLS material, so a rotated client certificate gets a new connection). Kept for the
 * fleet bench's side-by-side figures (`KUBEFN_BENCH_FLEET_TRANSPORTS`).
 */
export function nodeHttpsConnection(idleTimeoutMs: number): Connection {
  const agentOptions = { keepAlive: true, timeout: idleTimeoutMs };
  const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };
  return {
    send(x: Exchange): Promise<TransportResponse> {
      const agent = x.url.protocol === "http:" ? agents.http : agents.https;
      const headers: http.OutgoingHttpHeaders = { ...x.headers };
      if (x.body !== undefined) headers["content-length"] = Buffer.byteLength(x.body);
      const opts: https.RequestOptions = {
        ...x.tls,
        agent,
        method: x.method,
        headers,
        signal: x.signal,
      };
      return send(x.url, opts, x.body).catch((err: unknown) => {
        if (!(err instanceof StaleConnectionError)) throw err;
        return send(x.url, opts, x.body);
      });
    },
    async close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** A reused keep-alive connection the server had already closed: safe to send again. */
class StaleConnectionError extends Error {}

function send(url: URL, opts: https.RequestOptions, body: string | undefined): Promise<TransportResponse> {
  const client = url.protocol === "http:" ? http : https;
  return new Promise((resolve, reject) => {
    let responded = false;
    const request = client.request(url, opts, (res) => {
      responded = true;
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
        }
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString("utf8") });
      });
    });
    request.on("error", (err: NodeJS.ErrnoException) => {
      const stale = request.reusedSocket && !responded && err.code === "ECONNRESET";
      reject(stale ? new StaleConnectionError(err.message, { cause: err }) : err);
    });
    request.end(body);
  });
}
