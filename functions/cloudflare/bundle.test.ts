/**
 * The Workers bundle as `wrangler deploy --dry-run` builds it must hold no Node-only code:
 * no `node:` (or bare Node builtin) imports and nothing from @kubernetes/client-node. Only
 * "cloudflare:" modules may stay external.
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

  // Was 733 KB (182 KiB gzipped): zod's whole namespace with every locale, and a YAML parser for
  // manifests fixed at build time: 75 KiB. Then the GCE provider, the GKE audit-log intake, the
  // operator settings and the trust boundary: 81.8 KiB; then drift found by lists (the sweep runner,
  // the SubPool and Proxy drift decisions, probe-shard planning, the bounded prober: +5.6 KiB).
  // Then zod/mini (shared/zod) in every schema the Worker parses: −11 KiB. Then the fleet page, the
  // error policy and more (83.0 KiB); then CRD descriptions, CEL rules and printer columns moved to
  // each controller's crd.ts (−1.8), zod's iso and coerce namespaces narrowed (−0.5), kubefn's own
  // English messages for zod (−0.5), no JSON Schema metadata registered at runtime (−0.2): 80.0 KiB.
  // Probe shards' deferred confirmations with the spread (+147 B) were paid by one errorMessage
  // guard and one record closure in sweepOne (−62 B): 81,902 B. Refusing ServiceAccount token
  // Secrets as cloud-init was paid by one message prefix and one inline/secretRef branch in
  // resolveCloudInit and the unused ReconcileError.conflict: 81,894 → 81,891 B; the providers' tags
  // put on after the tenant's labels are sanitised: 81,885 B. The sweep leaving a cloud-init retry
  // to its backoff until the Secret reads, and a suspend's Events as Normal: 81,894 B (not yet paid).
  // `npm run bench -- bundle` prints it.
  it("stays at most 80 KiB gzipped", () => {
    expect(bundle.gzipBytes).toBeLessThanOrEqual(80 * 1024);
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
