/**
 * What the Node host's span export costs (in memory, one core, no cluster): CPU per pass of the
 * seam's `consume` (a pass of a FakeKube Proxy that reads it and is done, its log line to a
 * discarding sink) without a span sink — the default host — and with the OTLP exporter
 * (functions/node/span-export.ts) sending to a loopback receiver that discards what it gets. The
 * export's batching, JSON encoding and HTTP posts are counted: each run ends with the exporter's
 * flush. Also the one-off CPU of loading the SDK (only a host with an endpoint pays it). Medians
 * of 9 runs, in CPU time.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { parseWorkerEnv } from "../../functions/cloudflare/config.ts";
import { startSpanExport } from "../../functions/node/span-export.ts";
import { createKubefn, type Kubefn } from "../../shared/app/index.ts";
import { createRegistry, done, type Message, type Spans } from "../../shared/runtime/index.ts";
import { FakeKube, fakeContext } from "../support/fake-kube.ts";
import { ProxyResource, proxyController } from "../unit/runtime/controllers.ts";
import type { BenchRow } from "./cluster.ts";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

const PROXIES = 100;
const BATCHES = 50;

function seam(spans: Spans | undefined): Kubefn {
  const kube = new FakeKube();
  for (let i = 0; i < PROXIES; i++)
    kube.seed(ProxyResource, {
      apiVersion: "crawl.example.com/v1alpha1",
      kind: "Proxy",
      metadata: { name: `p-${i}`, namespace: "ns1", uid: `uid-${i}`, generation: 1 },
      spec: {},
    });
  const { ctx } = fakeContext(kube);
  const discard = () => undefined;
  return createKubefn(
    parseWorkerEnv({ KUBE_SERVER: "https://kube.example.com", KUBE_TOKEN: "t" }),
    {
      kube,
      queue: ctx.queue,
      prober: { probe: async () => ({ ok: true }) } as never,
      log: { info: discard, warn: discard, error: discard },
      metrics: ctx.metrics,
      ...(spans ? { spans } : {}),
    },
    { registry: createRegistry([proxyController({ reconcile: async () => done() })]), sweepTasks: [] },
  );
}

/** One run: BATCHES deliveries of PROXIES passes, each continuing a trace, then the flush. */
async function run(withExport: boolean): Promise<number> {
  const exporter = withExport ? await startSpanExport() : undefined;
  const kubefn = seam(exporter?.spans);
  const bodies: Message[] = Array.from({ length: PROXIES }, (_, i) => ({
    request: { controller: "proxy", namespace: "ns1", name: `p-${i}` },
    attempt: 0,
    traceparent: `00-${"0af7651916cd43dd8448eb211c80319c"}-${i.toString(16).padStart(16, "1")}-01`,
  }));
  const t = process.cpuUsage();
  for (let b = 0; b < BATCHES; b++) await kubefn.consume(bodies.map((body) => ({ body })));
  await exporter?.shutdown();
  return cpuMs(t);
}

export async function benchTraces(): Promise<BenchRow[]> {
  const received = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on("data", (c: Buffer) => {
      received.bytes += c.length;
    });
    req.on("end", () => {
      received.requests++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const t = process.cpuUsage();
    await startSpanExport();
    const loadMs = cpuMs(t);
    await run(false);
    await run(true); // warm up both
    const without: number[] = [];
    const withExport: number[] = [];
    for (let r = 0; r < 9; r++) {
      without.push(await run(false));
      withExport.push(await run(true));
    }
    const passes = PROXIES * BATCHES;
    const perPass = (ms: number) => Math.round((ms * 1e6) / passes);
    const base = perPass(median(without));
    const exported = perPass(median(withExport));
    return [
      {
        name: "pass, no span sink",
        figure: base,
        unit: "ns/pass (1 core)",
        note: "the seam's consume of a FakeKube pass (read, done, pass line): the default host",
      },
      {
        name: "pass, spans over OTLP",
        figure: exported,
        unit: "ns/pass (1 core)",
        note: `the same with a span per pass exported (BatchSpanProcessor, OTLP/HTTP JSON to loopback; ${Math.round(received.bytes / received.requests / 1024)} KiB per post)`,
      },
      {
        name: "span export per pass",
        figure: exported - base,
        unit: "ns/pass (1 core)",
        note: "the difference: span start and end, batching, JSON encoding, the HTTP post",
      },
      {
        name: "OpenTelemetry SDK load",
        figure: Math.round(loadMs),
        unit: "ms CPU, once",
        note: "dynamic import of the SDK and exporter at start, only with OTEL_EXPORTER_OTLP_ENDPOINT set",
      },
    ];
  } finally {
    if (endpoint === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}
