/**
 * A small OTLP/HTTP trace receiver on loopback, as a collector's `otlp` receiver answers:
 * `POST /v1/traces` with `application/json` (the OTLP JSON encoding: hex ids) or
 * `application/x-protobuf` (decoded here field by field: only what tests read), answered 200 with
 * an empty `ExportTraceServiceResponse`.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** One received span, as tests read it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's StatusCode: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: an `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  url: string;
  spans: ReceivedSpan[];
  /** Requests by content type, e.g. `{ "application/json": 3 }`. */
  requests: Record<string, number>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: Record<string, number> = {};
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim();
      requests[type] = (requests[type] ?? 0) + 1;
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks);
      try {
        if (type === "application/json") {
          spans.push(...decodeJson(JSON.parse(body.toString("utf8")) as JsonRequest));
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } else if (type === "application/x-protobuf") {
          spans.push(...decodeProtobuf(body));
          res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
        } else {
          res.writeHead(415).end();
        }
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type JsonValue = {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
};
type JsonAttribute = { key: string; value: JsonValue };
interface JsonRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonAttribute[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        attributes?: JsonAttribute[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}

/** The OTLP JSON encoding: ids are hex strings, 64-bit integers strings or numbers. */
export function decodeJson(request: JsonRequest): ReceivedSpan[] {
  const attrs = (list: JsonAttribute[] = []) => {
    const out: Record<string, string | number | boolean> = {};
    for (const { key, value } of list) {
      const v = value.stringValue ?? value.boolValue ?? value.doubleValue ?? value.intValue;
      if (v !== undefined) out[key] = value.intValue !== undefined ? Number(v) : v;
    }
    return out;
  };
  return (request.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? "",
        name: s.name,
        kind: s.kind ?? 0,
        attributes: attrs(s.attributes),
        statusCode: s.status?.code ?? 0,
        resource: attrs(rs.resource?.attributes),
      })),
    ),
  );
}

/** One protobuf field: its number and its value (a varint, or the bytes of a length-delimited field). */
type Field = { no: number; varint?: bigint; bytes?: Uint8Array; fixed64?: Buffer };

function* fields(buf: Uint8Array): Generator<Field> {
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++];
      if (b === undefined) throw new Error("truncated varint");
      result |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return result;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    switch (key & 7) {
      case 0:
        yield { no, varint: varint() };
        break;
      case 1:
        yield { no, fixed64: Buffer.from(buf.subarray(i, i + 8)) };
        i += 8;
        break;
      case 2: {
        const len = Number(varint());
        yield { no, bytes: buf.subarray(i, i + len) };
        i += len;
        break;
      }
      case 5:
        i += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${key & 7}`);
    }
  }
}

const hex = (b?: Uint8Array) => (b ? Buffer.from(b).toString("hex") : "");
const text = (b?: Uint8Array) => (b ? Buffer.from(b).toString("utf8") : "");

function protoAttributes(list: Uint8Array[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list) {
    let key = "";
    let value: string | number | boolean | undefined;
    for (const f of fields(kv)) {
      if (f.no === 1) key = text(f.bytes);
      if (f.no === 2 && f.bytes) {
        // AnyValue: 1 string, 2 bool, 3 int64, 4 double.
        for (const v of fields(f.bytes)) {
          if (v.no === 1) value = text(v.bytes);
          if (v.no === 2) value = v.varint === 1n;
          if (v.no === 3) value = Number(BigInt.asIntN(64, v.varint ?? 0n));
          if (v.no === 4 && v.fixed64) value = v.fixed64.readDoubleLE(0);
        }
      }
    }
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** `ExportTraceServiceRequest` in the protobuf encoding (opentelemetry-proto, trace/v1). */
export function decodeProtobuf(body: Uint8Array): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of fields(body)) {
    if (rs.no !== 1 || !rs.bytes) continue;
    let resource: Record<string, string | number | boolean> = {};
    const scopeSpans: Uint8Array[] = [];
    for (const f of fields(rs.bytes)) {
      if (f.no === 1 && f.bytes)
        resource = protoAttributes([...fields(f.bytes)].filter((a) => a.no === 1).map((a) => a.bytes!));
      if (f.no === 2 && f.bytes) scopeSpans.push(f.bytes);
    }
    for (const ss of scopeSpans) {
      for (const sf of fields(ss)) {
        if (sf.no !== 2 || !sf.bytes) continue;
        const span: ReceivedSpan = {
          traceId: "",
          spanId: "",
          parentSpanId: "",
          name: "",
          kind: 0,
          attributes: {},
          statusCode: 0,
          resource,
        };
        const attributes: Uint8Array[] = [];
        for (const f of fields(sf.bytes)) {
          if (f.no === 1) span.traceId = hex(f.bytes);
          if (f.no === 2) span.spanId = hex(f.bytes);
          if (f.no === 4) span.parentSpanId = hex(f.bytes);
          if (f.no === 5) span.name = text(f.bytes);
          if (f.no === 6) span.kind = Number(f.varint ?? 0n);
          if (f.no === 9 && f.bytes) attributes.push(f.bytes);
          if (f.no === 15 && f.bytes)
            for (const st of fields(f.bytes)) if (st.no === 3) span.statusCode = Number(st.varint ?? 0n);
        }
        span.attributes = protoAttributes(attributes);
        out.push(span);
      }
    }
  }
  return out;
}
