// Preloaded into the fleet bench's host (`NODE_OPTIONS=--import <this file>`) when the bench compares
// transports: times every outgoing HTTP request from its creation to its response's last byte,
// through the diagnostics channels node:http and undici publish (the transport is not touched),
// and appends `<end epoch ms> <duration ms>` lines to $KUBEFN_BENCH_TIMING_FILE every second.
// In the bench the host's only HTTP client requests are the API server's: probes use raw sockets,
// and span export is off. Plain JavaScript: it loads before tsx.
import { subscribe } from "node:diagnostics_channel";
import { appendFileSync } from "node:fs";

const file = process.env.KUBEFN_BENCH_TIMING_FILE;
if (file) {
  const started = new WeakMap();
  let lines = [];
  const done = (request) => {
    const t0 = started.get(request);
    if (t0 === undefined) return;
    started.delete(request);
    lines.push(`${Date.now()} ${(performance.now() - t0).toFixed(3)}`);
  };
  // undici (HTTP/1.1 and HTTP/2): created at dispatch, complete with its trailers.
  subscribe("undici:request:create", ({ request }) => started.set(request, performance.now()));
  subscribe("undici:request:trailers", ({ request }) => done(request));
  subscribe("undici:request:error", ({ request }) => started.delete(request));
  // node:http(s): created in ClientRequest's constructor, complete at the response's end.
  subscribe("http.client.request.start", ({ request }) => started.set(request, performance.now()));
  subscribe("http.client.response.finish", ({ request, response }) => {
    response.once("end", () => done(request));
  });
  const flush = () => {
    if (lines.length === 0) return;
    appendFileSync(file, `${lines.join("\n")}\n`);
    lines = [];
  };
  setInterval(flush, 1000).unref();
  process.once("exit", flush);
}
