/**
 * PromQL checks shared by the alert rules' and the dashboard's tests: Prometheus' own grammar
 * (`@prometheus-io/lezer-promql`, the parser of its web UI) and the series the code emits.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parser } from "@prometheus-io/lezer-promql";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** Syntax errors and the metric names selected, from the PromQL syntax tree. */
export function analyse(expr: string): { errors: number; metrics: string[] } {
  const tree = parser.parse(expr);
  let errors = 0;
  const metrics: string[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors++;
      if (node.name === "VectorSelector") {
        const id = node.node.getChild("Identifier");
        if (id) metrics.push(expr.slice(id.from, id.to));
      }
    },
  });
  return { errors, metrics };
}

/**
 * Series names the code emits: `metrics.count|gauge|observe|setTotal("…")` in shared/ and
 * functions/, a histogram's as its `_bucket`, `_sum` and `_count` series.
 */
export function emittedMetrics(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith(".ts") && !path.endsWith(".test.ts")) {
        for (const m of readFileSync(path, "utf8").matchAll(
          /\.(count|gauge|observe|setTotal)\(\s*"([a-z_:]+)"/g,
        )) {
          if (m[1] === "observe")
            for (const suffix of ["_bucket", "_sum", "_count"]) names.add(m[2]! + suffix);
          else names.add(m[2]!);
        }
      }
    }
  };
  walk(join(root, "shared"));
  walk(join(root, "functions"));
  walk(join(root, "infra/relay"));
  return names;
}
