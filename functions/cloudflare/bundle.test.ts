/**
 * The Workers bundle as `wrangler deploy --dry-run` builds it must hold no Node-only code:
 * no `node:` (or bare Node builtin) imports and nothing from @kubernetes/client-node. Only
 * "cloudflare:" modules may stay external.
 *
 * Its size is no longer held to a cap: what matters is the cold start, whose CPU time
 * `npm run bench -- bundle` measures in workerd and holds to a budget (a timing, so a bench).
 */
import { builtinModules } from "node:module";
import { beforeAll, describe, expect, it } from "vitest";
import { buildWorkerBundle, type WorkerBundle } from "../../test/support/worker-bundle.ts";

const clientNodeMarkers = ["@kubernetes/client-node", "CoreV1Api", "loadFromDefault", "KubeConfig"];

/** External module specifiers an ESM bundle still imports (static, dynamic, or require). */
function externalImports(code: string): string[] {
  const found = new Set<string>();
  for (const m of code.matchAll(
    /\bfrom\s*"([^"]+)"|\bimport\s*\(\s*"([^"]+)"\s*\)|\brequire\s*\(\s*"([^"]+)"\s*\)/g,
  )) {
    found.add((m[1] ?? m[2] ?? m[3])!);
  }
  for (const m of code.matchAll(/^\s*import\s*"([^"]+)"/gm)) found.add(m[1]!);
  return [...found].sort();
}

let bundle: WorkerBundle;
let code: string;

beforeAll(async () => {
  bundle = await buildWorkerBundle();
  code = bundle.code;
}, 180_000);

describe("the Workers bundle", () => {
  it("imports only cloudflare: modules", () => {
    const externals = externalImports(code);
    expect(externals.filter((s) => !s.startsWith("cloudflare:"))).toEqual([]);
    expect(externals).toContain("cloudflare:sockets");
  });

  it("contains no Node builtin import under any spelling", () => {
    const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
    expect(externalImports(code).filter((s) => builtins.has(s) || s.startsWith("node:"))).toEqual([]);
  });

  it("contains no @kubernetes/client-node code", () => {
    expect(clientNodeMarkers.filter((marker) => code.includes(marker))).toEqual([]);
  });

  it("carries zod/mini, not classic zod, and no zod JSON Schema generator (only gen:crds, on Node)", () => {
    expect(code).not.toContain("draft-2020-12");
    // Classic zod's schemas carry every validator as a method, so none of them tree-shakes.
    expect(code).toContain('"ZodMiniString"');
    expect(code).not.toContain('"ZodString"');
    // English messages only (shared/zod/messages.ts, in the wording of zod's English locale).
    expect(code).toContain("Invalid input");
    expect(code).not.toContain("Nieprawidłowe");
  });

  it("carries no YAML parser (manifests are parsed at build time)", () => {
    expect(code).not.toMatch(/parseAllDocuments|YAMLParseError/);
  });
});

describe("externalImports", () => {
  it.each([
    ['import{connect as a}from"cloudflare:sockets";', ["cloudflare:sockets"]],
    ['import fs from "node:fs"; const x = await import("net"); require("tls")', ["net", "node:fs", "tls"]],
    ['import "node:process";\nconst s = "nothing here";', ["node:process"]],
  ])("%j → %j", (source, expected) => expect(externalImports(source)).toEqual(expected));
});
