export { mapWithConcurrency } from "./map-with-concurrency.ts";
