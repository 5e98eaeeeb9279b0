export {
  auditEventSchema,
  EventBatchError,
  type RelayBatch,
  type RelayEvent,
  relayBatchSchema,
} from "./event-batch.ts";
export { MAPPED_SUBRESOURCES, mapEvents, WRITE_VERBS } from "./event-mapping.ts";
export {
  INTAKE_CANARY_CONTROLLER,
  INTAKE_CANARY_NAMESPACE,
  INTAKE_CANARY_PREFIX,
  INTAKE_RECEIVED_REASON,
} from "./intake-canary.ts";
