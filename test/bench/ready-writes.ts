import type { BenchRow } from "./cluster.ts";

export async function benchApplyToReady(): Promise<BenchRow[]> {
  return [];
}
