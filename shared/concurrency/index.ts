export { type KeyedSemaphore, keyedSemaphore } from "./keyed-semaphore.ts";
export { mapWithConcurrency } from "./map-with-concurrency.ts";
export { onceUntilFailure } from "./once.ts";
export { type Semaphore, semaphore } from "./semaphore.ts";
export { sharedInFlight } from "./shared-in-flight.ts";
export { singleFlight } from "./single-flight.ts";
