/**
 * A byte stream read as UTF-8 text, abandoned (cancelled) as soon as it exceeds `maxBytes`:
 * `undefined` then. For request bodies and decompressed payloads whose size the sender controls.
 */
export async function readTextCapped(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
): Promise<string | undefined> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
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
