export { mapWithConcurrency } from "./map-with-concurrency.ts";
export { singleFlight } from "./single-flight.ts";
