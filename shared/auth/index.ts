export { tokensEqual } from "./tokens.ts";
