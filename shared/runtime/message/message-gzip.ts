import { isRecord } from "../../guards/index.ts";
import type { Message } from "../core/index.ts";
import { cutJob, messageBytes } from "./message-fit.ts";

/**
 * A message as a platform queue carries it when gzip makes it smaller: its JSON, gzipped, in
 * base64. Queues and SQS bill every 64 KB of a message as one operation or request, and a probe
 * shard's views (names, addresses, counters, their MACs) shrink about sevenfold: a second's 300
 * Proxies of a 10,000-object fleet are one billed message instead of three.
 */
export interface GzipBody {
  gzip: string;
}

/** Messages below this many bytes of JSON travel as they are (a pass, a small shard). */
export const GZIP_MIN_BYTES = 8_192;

/** The most JSON a carried body may expand to: a larger one is not kubefn's and is left as it came. */
export const MAX_EXPANDED_BYTES = 4 * 1024 * 1024;

/**
 * What a queue sends for `message`: the message itself, or its {@link GzipBody} when that is
 * smaller; a job whose body is still above `maxCarriedBytes` is cut by its objects (already
 * signed: each object keeps its MAC) until each piece's body fits, or it is a single object.
 *
 * @example
 * const bodies = (await Promise.all(batch.map((m) => carriedBodies(m, 64_000)))).flat();
 */
export async function carriedBodies(
  message: Message,
  maxCarriedBytes: number,
): Promise<(Message | GzipBody)[]> {
  const body = await compressed(message);
  if (bodyBytes(body) <= maxCarriedBytes || message.kind !== "job" || message.job.objects.length < 2)
    return [body];
  const pieces = cutJob(message, Math.ceil(messageBytes(message) / 2));
  if (pieces.length < 2) return [body];
  return (await Promise.all(pieces.map((p) => carriedBodies(p, maxCarriedBytes)))).flat();
}

/** The bytes a carried body takes on the queue (its JSON). */
export function bodyBytes(body: Message | GzipBody): number {
  return "gzip" in body && typeof body.gzip === "string"
    ? body.gzip.length + 11
    : messageBytes(body as Message);
}

/**
 * The message a delivered body carries: a {@link GzipBody} expanded and parsed; anything else as
 * it came (the core then opens or drops it). A body that does not expand — bad base64, not gzip,
 * above {@link MAX_EXPANDED_BYTES}, not JSON — is returned as it came too, and dropped by the
 * core as no message of kubefn's.
 */
export async function expandedBody(body: unknown): Promise<unknown> {
  if (!isRecord(body) || typeof body.gzip !== "string" || Object.keys(body).length !== 1) return body;
  try {
    const json = await through(fromBase64(body.gzip), new DecompressionStream("gzip"), MAX_EXPANDED_BYTES);
    return JSON.parse(new TextDecoder().decode(json)) as unknown;
  } catch {
    return body;
  }
}

async function compressed(message: Message): Promise<Message | GzipBody> {
  const json = JSON.stringify(message);
  if (json.length < GZIP_MIN_BYTES) return message;
  const gzip = toBase64(await through(new TextEncoder().encode(json), new CompressionStream("gzip")));
  return gzip.length + 11 < json.length ? { gzip } : message;
}

/** `bytes` through a (de)compression stream, refusing more than `cap` bytes out. */
async function through(
  bytes: Uint8Array,
  stream: CompressionStream | DecompressionStream,
  cap = Number.POSITIVE_INFINITY,
): Promise<Uint8Array> {
  const writer = stream.writable.getWriter();
  // Not awaited: the writes complete as the readable side is read (awaiting first would stall).
  const written = writer.write(bytes as Uint8Array<ArrayBuffer>).then(() => writer.close());
  written.catch(() => {});
  const reader = stream.readable.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > cap) {
      await reader.cancel();
      throw new RangeError(`expands beyond ${cap} bytes`);
    }
    chunks.push(value);
  }
  await written;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
