export {
  bearerMatches,
  bearerToken,
  SIGNATURE_HEADER,
  type SignatureVerdict,
  signBatch,
  TIMESTAMP_HEADER,
  verifyBatch,
} from "./relay-signature.ts";
export { tokensEqual } from "./tokens.ts";
