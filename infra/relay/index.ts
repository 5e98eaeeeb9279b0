export { Batcher, type BatchRules, flushDelay } from "./batcher.ts";
export { CoalescingBuffer, coalesce, eventKey } from "./buffer.ts";
export {
  type PredicateKind,
  predicateFor,
  type RelayKind,
  relayKindSchema,
  relayKindsFor,
  relayKindsOfOperators,
} from "./kinds.ts";
export * from "./predicates.ts";
export { createRelay, type Relay, type RelayOptions } from "./relay.ts";
export {
  type Backoff,
  backoffDelay,
  createSender,
  relayBatch,
  retryStatusCodes,
  type SenderOptions,
  type SendResult,
  verdictFor,
} from "./sender.ts";
export { clientNodeWatchStream, type RawWatchEvent, type WatchStream } from "./watch-stream.ts";
export { isGone, KindWatcher, type KindWatcherOptions, relayObject } from "./watcher.ts";
