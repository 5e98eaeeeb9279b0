import type { BenchRow } from "./cluster.ts";

export async function benchMessagesPerHour(): Promise<BenchRow[]> {
  return [];
}
