export { backoffSeconds } from "./backoff.ts";
export {
  FOREIGN_STATUS_REASON,
  IMMEDIATE_CONFLICT_RETRIES,
  LISTED_MAX_AGE_SECONDS,
  type PassResult,
  reconcileResultOf,
  reconcileResults,
  runPass,
} from "./executor.ts";
export { finalizerDrift, runController } from "./finalize.ts";
export { type RefusedController, startable } from "./stopped.ts";
