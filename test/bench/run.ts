/**
 * `npm run bench`: runs each named bench in turn and prints one table row per bench with the
 * fields it returned. Add a bench by appending to `benches`; pass names to run only those
 * (`npm run bench -- mapping`).
 */
import { benchAuditZod, benchMapping } from "./mapping.ts";

type BenchResult = Record<string, number | string | boolean>;

const benches: { name: string; run: () => Promise<object> }[] = [
  { name: "mapping", run: () => benchMapping() },
  { name: "audit-zod-reference", run: () => benchAuditZod() },
];

const only = process.argv.slice(2);
const rows: Record<string, BenchResult> = {};
for (const bench of benches) {
  if (only.length > 0 && !only.includes(bench.name)) continue;
  rows[bench.name] = (await bench.run()) as BenchResult;
}
console.table(rows);
