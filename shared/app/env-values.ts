/** A comma-separated list, trimmed, empties dropped (the settings' own helper, shared with the operators). */
export { commaList } from "../zod/index.ts";
