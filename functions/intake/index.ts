export { SIGNATURE_HEADER, signBatch, TIMESTAMP_HEADER, verifyBatch } from "../../shared/auth/index.ts";
export {
  type BatchSource,
  createIntakeApp,
  type IntakeOptions,
  MalformedBatchError,
  type MappedBatch,
} from "./app.ts";
export { mapWithRegistry } from "./wire.ts";
