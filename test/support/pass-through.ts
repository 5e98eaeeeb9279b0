/**
 * The request a plain-HTTP pass-through to the API server sends on: the client's method, path,
 * headers (Host rewritten, hop-by-hop `connection` dropped) and body, to `target`. Shared by the
 * recording pass-through (api-recorder.ts) and the fault proxy (fault-proxy.ts), which see the
 * same requests and must forward them the same way.
 */
import {
  type ClientRequest,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";

/** Sends `req` (its `body` already read) to `target`; `onResponse` gets the upstream's answer. */
export function forwardRequest(
  target: URL,
  req: IncomingMessage,
  body: Buffer,
  onResponse: (upstream: IncomingMessage) => void,
): ClientRequest {
  const headers = { ...req.headers, host: target.host };
  delete headers.connection;
  const up = httpRequest(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    onResponse,
  );
  up.end(body);
  return up;
}

/**
 * Forwards `req` and streams the upstream's answer to `res` as it arrives (so a watch stays open),
 * calling `onStatus` with the upstream's status first. An unreachable upstream is a 502; a client
 * that goes away ends the upstream request.
 */
export function passThrough(
  target: URL,
  req: IncomingMessage,
  body: Buffer,
  res: ServerResponse,
  onStatus?: (status: number) => void,
): void {
  const up = forwardRequest(target, req, body, (r) => {
    onStatus?.(r.statusCode ?? 502);
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  up.on("error", () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  res.on("close", () => up.destroy());
}
