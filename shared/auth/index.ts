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
export { tokensEqual } from "./tokens.ts";
