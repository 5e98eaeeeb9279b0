/**
 * The Node host's OTLP span export, through the real SDK to the tests' OTLP receiver on loopback:
 * a hop's span carries the attributes its end names, the declared cluster among them (issue 35).
 */
import { afterEach, describe, expect, it } from "vitest";
import { traceFrom } from "../../shared/runtime/index.ts";
import { type OtlpReceiver, startOtlpReceiver } from "../../test/support/otlp-receiver.ts";
import { startSpanExport } from "./span-export.ts";

let receiver: OtlpReceiver | undefined;
const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
afterEach(async () => {
  if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
  await receiver?.close();
  receiver = undefined;
});

describe("span export", () => {
  it("a pass's span carries kubefn.cluster, the cluster its hop worked on", async () => {
    receiver = await startOtlpReceiver();
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
    const { spans, shutdown } = await startSpanExport();
    const trace = traceFrom(undefined);
    spans.start(
      "pass",
      trace,
    )({
      request: { controller: "proxy", namespace: "ns1", name: "p1", kind: "Proxy" },
      result: "done",
      trigger: "audit",
      cluster: "east",
    });
    spans.start("sweep", traceFrom(undefined))({ result: "done", cluster: "west" });
    await shutdown();
    const byName = Object.fromEntries(receiver.spans.map((s) => [s.name, s]));
    expect(byName["pass proxy"]).toMatchObject({
      spanId: trace.spanId,
      attributes: { "kubefn.cluster": "east", "kubefn.name": "p1", "kubefn.result": "done" },
    });
    expect(byName.sweep?.attributes["kubefn.cluster"]).toBe("west");
  });
});
