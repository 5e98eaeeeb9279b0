import { readFileSync } from "node:fs";
import type { HopEnd, HopKind, Spans, TraceContext } from "../../shared/app/index.ts";

/** A span exporter the host started: its sink for the seam, and how to flush it at exit. */
export interface SpanExport {
  spans: Spans;
  /** Sends what is queued and stops (the host's stop, on SIGTERM or SIGINT). */
  shutdown(): Promise<void>;
}

/**
 * Whether the environment asks for span export: an OTLP endpoint is named
 * (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and the SDK is not
 * switched off (`OTEL_SDK_DISABLED=true`).
 */
export function spanExportWanted(env: Record<string, string | undefined>): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** `messaging.batch.message_count`: an incubating attribute, copied as the conventions advise. */
const MESSAGING_BATCH_MESSAGE_COUNT = "messaging.batch.message_count";

/**
 * Exports one span per hop (intake batch, pass, job, sweep) over OTLP/HTTP (JSON) with the
 * OpenTelemetry trace SDK, batched (`BatchSpanProcessor`). The spans carry the trace and span
 * ids kubefn made and its log lines print, so a span found in a trace viewer is the line found by
 * its `span` field. The SDK reads the usual variables itself: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `_TRACES_ENDPOINT`), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` (default `kubefn`),
 * `OTEL_RESOURCE_ATTRIBUTES`.
 *
 * The SDK is imported here, dynamically: a host that exports nothing never loads it.
 *
 * Caveats: every hop is sampled (the chain is decided at its first hop, and kubefn's traceparent
 * always says sampled); a collector that is down costs the queued spans (2,048 at most), never a
 * pass — but at stop it holds the exit up to the exporter's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`,
 * 10 s by default), within a Pod's 30 s grace period.
 */
export async function startSpanExport(): Promise<SpanExport> {
  const [api, sdk, { OTLPTraceExporter }, resources, semconv] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/semantic-conventions"),
  ]);
  const version = (
    JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
  ).version;
  const random = new sdk.RandomIdGenerator();
  // The tracer takes kubefn's ids instead of drawing its own: `next` is set just before each
  // (synchronous) startSpan, and read by it.
  let next: TraceContext | undefined;
  const provider = new sdk.TracerProvider({
    resource: resources
      .defaultResource()
      .merge(
        resources.resourceFromAttributes({
          [semconv.ATTR_SERVICE_NAME]: "kubefn",
          [semconv.ATTR_SERVICE_VERSION]: version,
        }),
      )
      .merge(resources.detectResources({ detectors: [resources.envDetector] })),
    idGenerator: {
      generateTraceId: () => next?.traceId ?? random.generateTraceId(),
      generateSpanId: () => next?.spanId ?? random.generateSpanId(),
    },
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
  });
  const tracer = provider.getTracer("kubefn", version);
  const kinds: Record<HopKind, (typeof api.SpanKind)[keyof typeof api.SpanKind]> = {
    intake: api.SpanKind.PRODUCER,
    pass: api.SpanKind.CONSUMER,
    job: api.SpanKind.CONSUMER,
    sweep: api.SpanKind.INTERNAL,
  };
  const attributesOf = (end: HopEnd) => {
    const a: Record<string, string | number> = { "kubefn.result": end.result };
    const r = end.request;
    if (r?.namespace) a[semconv.ATTR_K8S_NAMESPACE_NAME] = r.namespace;
    if (r?.controller) a["kubefn.controller"] = r.controller;
    if (r?.kind) a["kubefn.kind"] = r.kind;
    if (r?.name) a["kubefn.name"] = r.name;
    if (end.trigger) a["kubefn.trigger"] = end.trigger;
    if (end.task) a["kubefn.task"] = end.task;
    if (end.source) a["kubefn.source"] = end.source;
    if (end.enqueued !== undefined) a[MESSAGING_BATCH_MESSAGE_COUNT] = end.enqueued;
    if (end.errorClass) a[semconv.ATTR_ERROR_TYPE] = end.errorClass;
    if (end.cluster) a["kubefn.cluster"] = end.cluster;
    return a;
  };
  const nameOf = (kind: HopKind, end: HopEnd) => {
    switch (kind) {
      case "intake":
        return "intake batch";
      case "pass":
        return `pass ${end.request?.controller ?? ""}`.trim();
      case "job":
        return `job ${[end.request?.controller, end.task].filter(Boolean).join("/")}`.trim();
      case "sweep":
        return "sweep";
    }
  };
  return {
    spans: {
      start(kind, trace) {
        const parent = trace.parentSpanId
          ? api.trace.setSpanContext(api.ROOT_CONTEXT, {
              traceId: trace.traceId,
              spanId: trace.parentSpanId,
              traceFlags: api.TraceFlags.SAMPLED,
              isRemote: true,
            })
          : api.ROOT_CONTEXT;
        next = trace;
        const span = tracer.startSpan(kind, { kind: kinds[kind] }, parent);
        next = undefined;
        return (end) => {
          span.updateName(nameOf(kind, end));
          span.setAttributes(attributesOf(end));
          if (end.result === "error") span.setStatus({ code: api.SpanStatusCode.ERROR });
          span.end();
        };
      },
    },
    shutdown: () => provider.shutdown(),
  };
}
