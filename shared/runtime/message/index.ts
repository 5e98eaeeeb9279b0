export { coalesce } from "./coalesce.ts";
export { authenticBodies, ENVELOPE_VERSION, openEnvelope, sealed, withoutBodies } from "./envelope.ts";
export { batchesOf, fitToQueue, messageBytes, platformQueue, type QueueLimits } from "./message-fit.ts";
export {
  bodyBytes,
  carriedBodies,
  expandedBody,
  GZIP_MIN_BYTES,
  type GzipBody,
  MAX_EXPANDED_BYTES,
} from "./message-gzip.ts";
export { hasBodies, type MessageAuthenticator, messageAuthenticatorFrom } from "./message-mac.ts";
