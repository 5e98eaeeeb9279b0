import { describe, expect, it } from "vitest";
import { relaySignedRequest } from "./relay-request.ts";
import { signBatch, TIMESTAMP_HEADER } from "./relay-signature.ts";
import { memoryReplayGuard } from "./replay.ts";

const secret = "s".repeat(32);
const now = 1_800_000_000;

async function headersFor(body: string, at = now): Promise<(name: string) => string | undefined> {
  const h = await signBatch(secret, body, at);
  return (name) => h[name];
}

describe("relaySignedRequest: headers, then body, then replay", () => {
  const opts = (replays = memoryReplayGuard()) => ({ secret, nowSeconds: now, windowSeconds: 300, replays });

  it("is undefined without signature headers: the request authenticates another way", () => {
    expect(relaySignedRequest(() => undefined, opts())).toBeUndefined();
  });

  it("refuses from the headers alone: not configured, one header missing, stale", async () => {
    const header = await headersFor("{}");
    expect(relaySignedRequest(header, { ...opts(), secret: undefined })).toEqual({
      refused: { status: 401, reason: "NotConfigured", message: "relay intake is not configured" },
    });
    const onlyTimestamp = (name: string) => (name === TIMESTAMP_HEADER ? String(now) : undefined);
    expect(relaySignedRequest(onlyTimestamp, opts())).toMatchObject({
      refused: { reason: "MissingSignature" },
    });
    const stale = await headersFor("{}", now - 301);
    expect(relaySignedRequest(stale, opts())).toMatchObject({
      refused: { status: 401, reason: "StaleTimestamp" },
    });
  });

  it("verifies the body, and a signature accepted once is a replay (409) until the window ends", async () => {
    const replays = memoryReplayGuard();
    const header = await headersFor('{"a":1}');
    const first = relaySignedRequest(header, opts(replays));
    if (!first || !("signed" in first)) throw new Error("expected signed headers to pass");
    expect(await first.signed.verify('{"a":2}')).toMatchObject({ status: 401, reason: "BadSignature" });
    // Not accepted yet (e.g. the enqueue failed): the same batch may come again.
    expect(await first.signed.verify('{"a":1}')).toBeUndefined();
    first.signed.accepted();
    const again = relaySignedRequest(header, opts(replays));
    if (!again || !("signed" in again)) throw new Error("expected signed headers to pass");
    expect(await again.signed.verify('{"a":1}')).toMatchObject({ status: 409, reason: "Replayed" });
  });
});
