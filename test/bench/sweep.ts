import type { BenchRow } from "./cluster.ts";

export async function benchSweep(_sizes: number[]): Promise<BenchRow[]> {
  return [];
}
