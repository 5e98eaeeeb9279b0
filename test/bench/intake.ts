import type { BenchRow } from "./cluster.ts";

export async function benchIntake(): Promise<BenchRow[]> {
  return [];
}
