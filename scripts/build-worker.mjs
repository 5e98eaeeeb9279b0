// Pre-bundles the Worker (wrangler.toml `[build]`) so that zod's JSON Schema generator stays out:
// only `npm run gen:crds` (Node) ever generates JSON Schema. The schemas are zod/mini (shared/zod),
// whose schemas do not reference the generator; classic zod's do (each carries toJSONSchema), so
// should classic zod come back into the bundle, its generator modules are replaced by functions
// that throw if called. wrangler
// then bundles dist/worker-src/worker.js as usual (minified, cloudflare: modules external).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = fileURLToPath(new URL("../", import.meta.url));
const jsonSchemaModules =
  /\/zod\/v4\/core\/(json-schema-processors|to-json-schema|json-schema-generator)\.js$/;

/** Module → functions of the same names that throw: the bundle keeps its imports, not the code. */
const withoutJsonSchema = {
  name: "without-zod-json-schema",
  setup(build) {
    build.onLoad({ filter: jsonSchemaModules }, (args) => {
      const source = readFileSync(args.path, "utf8");
      const names = new Set(
        [...source.matchAll(/export (?:function|const|class|let) (\w+)/g)].map((m) => m[1]),
      );
      for (const m of source.matchAll(/export \{([^}]*)\}/g)) {
        for (const part of m[1].split(",")) {
          const name = part
            .trim()
            .split(/\s+as\s+/)
            .pop();
          if (name) names.add(name);
        }
      }
      const stub = (n) =>
        `export function ${n}() { throw new Error("zod JSON Schema is not in the Worker bundle"); }`;
      return { contents: [...names].map(stub).join("\n"), loader: "js" };
    });
  },
};

await esbuild.build({
  absWorkingDir: root,
  entryPoints: ["functions/cloudflare/worker.ts"],
  outfile: "dist/worker-src/worker.js",
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2023",
  mainFields: ["module", "main"],
  conditions: ["workerd", "worker", "browser"],
  external: ["cloudflare:*"],
  plugins: [withoutJsonSchema],
  logLevel: "warning",
});
