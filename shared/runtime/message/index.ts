export { coalesce } from "./coalesce.ts";
export { authenticBodies, ENVELOPE_VERSION, openEnvelope, sealed, withoutBodies } from "./envelope.ts";
export { batchesOf, fitToQueue, messageBytes, platformQueue, type QueueLimits } from "./message-fit.ts";
export { hasBodies, type MessageAuthenticator, messageAuthenticatorFrom } from "./message-mac.ts";
