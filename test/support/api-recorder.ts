/**
 * A plain-HTTP pass-through to the API server that records every request the client under test
 * sends: its time, verb, path, body and the API server's answer. Point a kubeconfig's `server`
 * at `url` (the devcluster's plain-HTTP front door is `clusterInfo().httpProxy`).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { passThrough } from "./pass-through.ts";

export interface WireCall {
  at: number;
  method: string;
  path: string;
  body: string;
  /** The API server's answer (409: a guarded write met a newer resourceVersion). */
  code?: number;
  /** The request's `Authorization` header, if it had one. */
  authorization?: string;
}

/** `upstream` may be a function, for a recorder started before its API server (read per request). */
export function startRecordingApiProxy(
  upstream: string | (() => string),
): Promise<{ url: string; calls: WireCall[]; server: Server }> {
  const target = () => new URL(typeof upstream === "string" ? upstream : upstream());
  const calls: WireCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const call: WireCall = {
        at: Date.now(),
        method: req.method ?? "",
        path: req.url ?? "",
        body: body.toString("utf8"),
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      };
      calls.push(call);
      passThrough(target(), req, body, res, (code) => {
        call.code = code;
      });
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, server }),
    ),
  );
}
