import { buildWorkerBundle } from "../support/worker-bundle.ts";
import type { BenchRow } from "./cluster.ts";

/** The Workers bundle's size, raw and gzipped, as `wrangler deploy --dry-run` builds it. */
export async function benchBundle(): Promise<BenchRow[]> {
  const { bytes, gzipBytes } = await buildWorkerBundle();
  const kib = (n: number) => Math.round((n / 1024) * 10) / 10;
  return [
    {
      name: "worker bundle",
      figure: kib(gzipBytes),
      unit: "KiB gzipped",
      note: `worker.js ${kib(bytes)} KiB minified (wrangler deploy --dry-run; target ≤ 80 KiB gzipped)`,
    },
  ];
}
