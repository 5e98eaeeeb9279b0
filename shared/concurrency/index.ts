export { mapWithConcurrency } from "./map-with-concurrency.ts";
export { onceUntilFailure } from "./once.ts";
export { singleFlight } from "./single-flight.ts";
