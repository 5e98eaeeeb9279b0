import {
  checkSignatureHeaders,
  SIGNATURE_HEADER,
  type SignatureRefusal,
  TIMESTAMP_HEADER,
  verifyBody,
} from "./relay-signature.ts";
import type { ReplayGuard } from "./replay.ts";

/** Why a relay-signed request is refused, as intake answers it. */
export interface RelayRefusal {
  status: 401 | 409 | 503;
  reason: SignatureRefusal | "NotConfigured" | "Replayed" | "InFlight";
  message: string;
}

/** A relay-signed request whose headers passed; its body is checked once read. */
export interface SignedRelayRequest {
  /**
   * The body's MAC, then the replay guard's claim (check and record in one step): a refusal, or
   * `undefined` when the body may be used — then the signature is held until {@link accepted} or
   * {@link settled}, and a copy arriving meanwhile is refused 503 InFlight (retry).
   */
  verify(body: string): Promise<RelayRefusal | undefined>;
  /** Its work was enqueued: the signature is a replay from now until the window ends. */
  accepted(): void;
  /** The request is answered: a claim not {@link accepted} is released (call it in a `finally`). */
  settled(): void;
}

/**
 * The relay signature of a request, checked in intake's order (`POST /v1/events` and its Pub/Sub
 * entry alike): the headers before the body is read, then {@link SignedRelayRequest.verify} on the
 * body, then {@link SignedRelayRequest.accepted} once its work is enqueued. `undefined` when neither
 * signature header is present (authenticate the request another way).
 *
 * Caveats: a signature is remembered only on `accepted`, so a batch refused for a transient
 * failure (503) may be sent again under the same signature; a copy that arrives while the first
 * is still in flight is told to retry (503 InFlight), so it gets through if the first fails.
 */
export function relaySignedRequest(
  header: (name: string) => string | undefined,
  opts: { secret: string | undefined; nowSeconds: number; windowSeconds: number; replays: ReplayGuard },
): { refused: RelayRefusal } | { signed: SignedRelayRequest } | undefined {
  const signature = header(SIGNATURE_HEADER);
  const timestamp = header(TIMESTAMP_HEADER);
  if (signature === undefined && timestamp === undefined) return undefined;
  const { secret, nowSeconds, windowSeconds, replays } = opts;
  if (!secret) return refuse(401, "NotConfigured", "relay intake is not configured");
  const verdict = checkSignatureHeaders({ signature, timestamp }, nowSeconds, windowSeconds);
  if (!verdict.ok) return refuse(401, verdict.reason, describeRefusal(verdict.reason));
  const { checked } = verdict;
  const mac = checked.replayKey;
  let claimed = false;
  return {
    signed: {
      async verify(body) {
        if (!(await verifyBody(secret, body, checked))) {
          return { status: 401, reason: "BadSignature", message: describeRefusal("BadSignature") };
        }
        // No await between the check and the record: this is the one step (see replay.ts).
        const claim = replays.claim(mac, checked.timestampSeconds + windowSeconds, nowSeconds);
        if (claim === "replayed") {
          return { status: 409, reason: "Replayed", message: "this batch was already accepted" };
        }
        if (claim === "pending") {
          return { status: 503, reason: "InFlight", message: "this batch is being accepted; retry" };
        }
        claimed = true;
        return undefined;
      },
      accepted() {
        if (claimed) replays.confirm(mac);
        claimed = false;
      },
      settled() {
        if (claimed) replays.release(mac);
        claimed = false;
      },
    },
  };
}

function refuse(status: 401, reason: RelayRefusal["reason"], message: string) {
  return { refused: { status, reason, message } };
}

function describeRefusal(reason: SignatureRefusal): string {
  switch (reason) {
    case "MissingSignature":
      return `relay batches need both ${SIGNATURE_HEADER} and ${TIMESTAMP_HEADER}`;
    case "MalformedSignature":
      return `${SIGNATURE_HEADER} must be sha256=<64 hex> and ${TIMESTAMP_HEADER} unix seconds`;
    case "StaleTimestamp":
      return "timestamp outside the replay window";
    case "FutureTimestamp":
      return "timestamp in the future";
    case "BadSignature":
      return "signature does not match the body";
  }
}
