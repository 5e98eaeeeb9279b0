export {
  bearerAuth,
  boundHolder,
  type CrawlerCredential,
  clusterNamespaceToken,
  crawlerOf,
  credentialOf,
  mayUseCluster,
  mayUseNamespace,
  namespaceToken,
  parseCrawlerCredentials,
} from "./api-credentials.ts";
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
export { hmacSha256 } from "./hmac.ts";
export {
  DISCOVERY_PATH,
  type IssuedClaims,
  type IssuerOptions,
  importSigningKeys,
  issuedTokenSource,
  issuerDocuments,
  JWKS_PATH,
  type PublicJwk,
  type SigningJwk,
  type SigningKeys,
  signingJwksFrom,
  signJwt,
} from "./oidc-issuer.ts";
export { type RelayRefusal, relaySignedRequest, type SignedRelayRequest } from "./relay-request.ts";
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
export { memoryReplayGuard, type ReplayGuard } from "./replay.ts";
export { tokensEqual } from "./tokens.ts";
