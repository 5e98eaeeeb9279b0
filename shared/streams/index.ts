/**
 * A request's body as text, read as a stream and abandoned as soon as it exceeds `maxBytes` (a
 * declared Content-Length over the cap is refused without reading at all) or is still arriving
 * after `timeoutMs`. A request without a body reads as "". `admit`, when given, is asked for each
 * chunk's bytes as they arrive (a budget shared by the bodies being read): a chunk it refuses
 * abandons the body as `Busy`.
 */
export async function readBodyCapped(
  req: Request,
  maxBytes: number,
  timeoutMs: number,
  admit?: (bytes: number) => boolean,
): Promise<{ ok: true; text: string } | { ok: false; reason: "TooLarge" | "BodyTimeout" | "Busy" }> {
  const declared = Number(req.headers.get("content-length") ?? "");
  if (Number.isFinite(declared) && declared > maxBytes) {
    await req.body?.cancel().catch(() => {});
    return { ok: false, reason: "TooLarge" };
  }
  if (!req.body) return { ok: true, text: "" };
  const deadline = AbortSignal.timeout(timeoutMs);
  let refused = false;
  const stream = admit
    ? req.body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            if (admit(chunk.byteLength)) controller.enqueue(chunk);
            else {
              refused = true;
              controller.error(new Error("body budget spent"));
            }
          },
        }),
      )
    : req.body;
  try {
    const text = await readTextCapped(stream, maxBytes, deadline);
    return text === undefined ? { ok: false, reason: "TooLarge" } : { ok: true, text };
  } catch (err) {
    if (deadline.aborted) return { ok: false, reason: "BodyTimeout" };
    if (refused) return { ok: false, reason: "Busy" };
    throw err;
  }
}

/**
 * A byte stream read as UTF-8 text, abandoned (cancelled) as soon as it exceeds `maxBytes`:
 * `undefined` then. For request bodies and decompressed payloads whose size the sender controls.
 * When `signal` aborts first (e.g. a body deadline), the stream is cancelled and the signal's
 * reason is thrown: a sender cannot hold the reader by sending slowly.
 */
export async function readTextCapped(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const reader = stream.getReader();
  const onAbort = () => {
    reader.cancel(signal?.reason).catch(() => {});
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await readAll(reader, maxBytes, signal);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    if (signal?.aborted) onAbort();
  }
}

async function readAll(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxBytes: number,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    signal?.throwIfAborted();
    const { done, value } = await reader.read();
    signal?.throwIfAborted();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
