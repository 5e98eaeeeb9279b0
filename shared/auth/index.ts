export {
  fetchedKeys,
  GOOGLE_ISSUERS,
  GOOGLE_JWKS_URL,
  type KeySource,
  KeysUnavailableError,
  type PushTokenPolicy,
  type PushTokenVerdict,
  type RsaJwk,
  staticKeys,
  verifyPushToken,
} from "./google-oidc.ts";
export {
  bearerMatches,
  bearerToken,
  type CheckedHeaders,
  checkSignatureHeaders,
  maxFutureSkewSeconds,
  SIGNATURE_HEADER,
  type SignatureRefusal,
  type SignatureVerdict,
  signBatch,
  TIMESTAMP_HEADER,
  verifyBatch,
  verifyBody,
} from "./relay-signature.ts";
export { tokensEqual } from "./tokens.ts";
