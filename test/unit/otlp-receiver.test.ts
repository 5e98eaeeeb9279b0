/**
 * The tests' OTLP receiver (test/support/otlp-receiver.ts) reads the two OTLP/HTTP encodings a
 * collector accepts alike: the same spans, serialized by the SDK's own JSON and protobuf
 * serializers, posted to it, come out the same.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, describe, expect, it } from "vitest";
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlp-receiver.ts";

let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

function someSpans() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": "kubefn", "service.version": "9.9.9" }),
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
  });
  const tracer = provider.getTracer("test");
  const root = tracer.startSpan("intake batch", {
    kind: SpanKind.PRODUCER,
    attributes: { "messaging.batch.message_count": 2 },
  });
  const child = tracer.startSpan(
    "pass proxy",
    { kind: SpanKind.CONSUMER, attributes: { "k8s.namespace.name": "ns1", "kubefn.name": "p1", ok: false } },
    trace.setSpan(ROOT_CONTEXT, root),
  );
  child.setStatus({ code: SpanStatusCode.ERROR });
  child.end();
  root.end();
  return exporter.getFinishedSpans();
}

describe("the tests' OTLP receiver", () => {
  it("reads OTLP/HTTP JSON and protobuf into the same spans: ids, parent, name, kind, attributes, status, resource", async () => {
    receiver = await startOtlpReceiver();
    const spans = someSpans();
    const post = (type: string, body: Uint8Array | undefined) =>
      fetch(`${receiver!.url}/v1/traces`, {
        method: "POST",
        headers: { "content-type": type },
        body: Buffer.from(body!),
      });
    expect((await post("application/json", JsonTraceSerializer.serializeRequest(spans))).status).toBe(200);
    const fromJson = receiver.spans.splice(0);
    expect(
      (await post("application/x-protobuf", ProtobufTraceSerializer.serializeRequest(spans))).status,
    ).toBe(200);
    const fromProtobuf = receiver.spans.splice(0);
    expect(fromProtobuf).toEqual(fromJson);
    const [pass, intake] = fromJson;
    expect(intake).toMatchObject({ name: "intake batch", kind: 4, parentSpanId: "", statusCode: 0 });
    expect(intake?.attributes).toEqual({ "messaging.batch.message_count": 2 });
    expect(pass).toMatchObject({
      name: "pass proxy",
      kind: 5,
      traceId: intake?.traceId,
      parentSpanId: intake?.spanId,
      statusCode: 2,
      attributes: { "k8s.namespace.name": "ns1", "kubefn.name": "p1", ok: false },
    });
    expect(pass?.resource).toMatchObject({ "service.name": "kubefn", "service.version": "9.9.9" });
    expect(receiver.requests).toEqual({ "application/json": 1, "application/x-protobuf": 1 });
  });
});
