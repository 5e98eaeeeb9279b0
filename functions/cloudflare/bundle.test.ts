/**
 * The Workers bundle as `wrangler deploy --dry-run` builds it must hold no Node-only code:
 * no `node:` (or bare Node builtin) imports and nothing from @kubernetes/client-node. Only
 * "cloudflare:" modules may stay external.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
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

let dir: string;
let code: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "kubefn-worker-"));
  await promisify(execFile)(
    join(root, "node_modules/.bin/wrangler"),
    ["deploy", "--dry-run", "--outdir", dir, "--config", join(root, "wrangler.toml")],
    { cwd: root, env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
  );
  code = await readFile(join(dir, "worker.js"), "utf8");
}, 180_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

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

  it("stays well under the 3 MiB (free plan) gzipped limit", () => {
    const gzipped = gzipSync(code).length;
    console.log(`worker.js: ${(code.length / 1024).toFixed(1)} KiB, gzip ${(gzipped / 1024).toFixed(1)} KiB`);
    expect(gzipped).toBeLessThan(1024 * 1024);
  });
});

describe("externalImports", () => {
  it.each([
    ['import{connect as a}from"cloudflare:sockets";', ["cloudflare:sockets"]],
    ['import fs from "node:fs"; const x = await import("net"); require("tls")', ["net", "node:fs", "tls"]],
    ['import "node:process";\nconst s = "nothing here";', ["node:process"]],
  ])("%j → %j", (source, expected) => expect(externalImports(source)).toEqual(expected));
});
