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
