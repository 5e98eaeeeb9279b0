/**
 * Layering the lint and the compiler do not check: a production module reaches another folder
 * only through that folder's index.ts (its public surface). Allowed besides: a subfolder using its
 * parent folder's modules, and the platform entry points kept out of index.ts on purpose so that
 * one platform's sockets never enter another's bundle.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Imported by path: Node-only (shared/kube/node*) or Workers-only entry points of a
 * platform-neutral folder.
 */
const platformEntryPoints = new Set([
  "shared/kube/node.ts",
  "shared/health/socket-prober.ts",
  "shared/auth/relay-signature.ts",
]);

function productionFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter(
      (e) =>
        e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts"),
    )
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

function bypasses(file: string, source = readFileSync(join(root, file), "utf8")): string[] {
  const from = dirname(file);
  const found: string[] = [];
  for (const m of source.matchAll(/^import\s[^;]*?from\s+"(\.[^"]+)";/gms)) {
    const target = normalize(join(from, m[1]!));
    const to = dirname(target);
    if (to === from || target.endsWith("/index.ts") || platformEntryPoints.has(target)) continue;
    if (/^shared\/kube\/node[^/]*\.ts$/.test(target)) continue;
    // A controller's CRD notes (for gen:crds only) stay out of its index.ts, so runtime imports never load them.
    if (/^shared\/controllers\/[^/]+\/crd\.ts$/.test(target)) continue;
    if (`${from}/`.startsWith(`${to}/`)) continue;
    found.push(`${file} → ${target}`);
  }
  return found;
}

describe("cross-folder imports", () => {
  const files = ["shared", "functions", "infra/relay"].flatMap(productionFiles);

  it.each([
    ['import { a } from "../shared/kube/errors.ts";', ["functions/x.ts → shared/kube/errors.ts"]],
    [
      'import type {\n  B,\n} from "./node/work-queue.ts";',
      ["functions/x.ts → functions/node/work-queue.ts"],
    ],
    ['import { a } from "../shared/kube/index.ts";', []],
    ['import { a } from "./kubefn.ts";', []],
    ['import { connect } from "../shared/kube/node.ts";', []],
  ])("flags %j as %j", (source, expected) => {
    expect(files.length).toBeGreaterThan(100);
    expect(bypasses("functions/x.ts", source)).toEqual(expected);
  });

  it("go through the other folder's index.ts", () => {
    expect(files.flatMap((file) => bypasses(file))).toEqual([]);
  });
});
