/**
 * Layering the lint and the compiler do not check:
 * - a production module reaches another folder only through that folder's index.ts (its public
 *   surface). Allowed besides: a subfolder using its parent folder's modules, and the platform
 *   entry points kept out of index.ts on purpose so that one platform's sockets never enter
 *   another's bundle;
 * - imports run one way: `shared/` never imports `functions/`, the rest of `shared/` never imports
 *   the application in `shared/app/`, and no platform under `functions/` imports another; the
 *   tools (`cli/`, `scripts/`) and the installer library they share (`install/`) are imported by
 *   no production code, `cli/` never imports `scripts/` (nor `scripts/` `cli/`), and `install/`
 *   neither;
 * - no production module imports itself through a circle of others;
 * - the seam translates only: a platform (a module under `functions/`) imports nothing from
 *   `shared/runtime/` (what it needs comes through `shared/app`), and `createKubefn` stays a short
 *   composition of the app's parts (at most {@link CREATE_KUBEFN_MAX_LINES} lines);
 * - the runtime keeps its rooms: no module sits at `shared/runtime/`'s top but its index.ts, and
 *   code outside the runtime imports its top index only (a test may take a runtime-internal name
 *   from a room's index.ts, never a room's file);
 * - nothing in the app or the platforms knows which operators exist: no operator's name, nor its
 *   primary kind's, appears in a production module of `shared/app/` or `functions/` (each
 *   operator declares what it needs; the app loops over `operators`).
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { operators } from "../../shared/controllers/index.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Imported by path: Node-only (shared/kube/node*) or Workers-only entry points of a
 * platform-neutral folder.
 */
const platformEntryPoints = new Set([
  "shared/kube/node.ts",
  "shared/health/node-prober.ts",
  "shared/health/socket-prober.ts",
  "shared/auth/relay-signature.ts",
]);

/**
 * Imported by path from scripts/ only: build-time parts of a folder its index.ts leaves out (the
 * CRD and manifest renderers), and the schemas the settings page is generated from.
 */
const buildTimeEntryPoints = new Set([
  "shared/crd/render.ts",
  "shared/controllers/site/manifests-yaml.ts",
  "functions/node/config.ts",
  "shared/app/operator-settings.ts",
  "shared/app/settings.ts",
]);

/** Every folder whose modules the layering rules cover. */
const layeredFolders = ["shared", "functions", "infra/relay", "cli", "scripts", "install"];

function productionFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter(
      (e) =>
        e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts"),
    )
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** The production modules `file` imports (relative specifiers, resolved against the repository). */
function importsOf(file: string, source = readFileSync(join(root, file), "utf8")): string[] {
  return [...source.matchAll(/^(?:import|export)\s[^;]*?from\s+"(\.[^"]+)";/gms)].map((m) =>
    normalize(join(dirname(file), m[1]!)),
  );
}

function bypasses(file: string, source = readFileSync(join(root, file), "utf8")): string[] {
  const from = dirname(file);
  const found: string[] = [];
  for (const target of importsOf(file, source)) {
    const to = dirname(target);
    if (to === from || target.endsWith("/index.ts") || platformEntryPoints.has(target)) continue;
    if (/^shared\/kube\/node[^/]*\.ts$/.test(target)) continue;
    // A controller's CRD notes (for gen:crds only) stay out of its index.ts, so runtime imports never load them.
    if (/^shared\/controllers\/[^/]+\/crd\.ts$/.test(target)) continue;
    // Build-time modules the generators read, kept out of their folders' runtime surface.
    if (buildTimeEntryPoints.has(target) && file.startsWith("scripts/")) continue;
    // Development servers the tests also start (scripts/forward-proxy.ts serves their fixtures).
    if (file.startsWith("scripts/") && target.startsWith("test/support/")) continue;
    if (`${from}/`.startsWith(`${to}/`)) continue;
    found.push(`${file} → ${target}`);
  }
  return found;
}

describe("cross-folder imports", () => {
  const files = layeredFolders.flatMap(productionFiles);

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

/** Where `file` may not import `target` from, whatever the path: the direction rules. */
function wrongWay(file: string, target: string): string | undefined {
  const platform = (path: string) => /^functions\/([^/]+)\//.exec(path)?.[1];
  if (file.startsWith("shared/") && target.startsWith("functions/")) return "shared/ imports functions/";
  if (file.startsWith("shared/") && !file.startsWith("shared/app/") && target.startsWith("shared/app/")) {
    return "the core imports the application (shared/app/)";
  }
  const tool = (path: string) => /^(cli|scripts|install)\//.exec(path)?.[1];
  const [from, to] = [tool(file), tool(target)];
  if (to && !from) return `production code imports ${to}/`;
  if (from === "install" && to && to !== "install") return `install/ imports ${to}/`;
  if (from && to && from !== to && to !== "install")
    return `${from}/ imports ${to}/ (share through install/)`;
  const [a, b] = [platform(file), platform(target)];
  if (a && b && a !== b) return `platform ${a} imports platform ${b}`;
  return undefined;
}

/** Every circle of imports among `files`, each as the path that closes it. */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, "open");
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

describe("import direction", () => {
  const files = layeredFolders.flatMap(productionFiles);

  it.each([
    ["shared/runtime/x.ts", "functions/node/host.ts", "shared/ imports functions/"],
    ["shared/kube/x.ts", "shared/app/kubefn.ts", "the core imports the application (shared/app/)"],
    ["functions/aws/x.ts", "functions/node/host.ts", "platform aws imports platform node"],
    ["shared/app/fleet/x.ts", "shared/app/kubefn.ts", undefined],
    ["functions/node/dev/x.ts", "functions/node/host.ts", undefined],
    ["functions/cloudflare/x.ts", "shared/app/index.ts", undefined],
    ["cli/main.ts", "scripts/release/images.ts", "cli/ imports scripts/ (share through install/)"],
    ["cli/main.ts", "install/index.ts", undefined],
    ["scripts/release.ts", "install/index.ts", undefined],
    ["install/manifest.ts", "scripts/release/images.ts", "install/ imports scripts/"],
    ["shared/app/x.ts", "install/index.ts", "production code imports install/"],
    ["functions/node/x.ts", "cli/cluster.ts", "production code imports cli/"],
  ])("%s → %s: %s", (file, target, expected) => {
    expect(wrongWay(file, target)).toBe(expected);
  });

  it("runs one way: shared/ never into functions/, the core never into shared/app/, no platform into another", () => {
    const found = files.flatMap((file) =>
      importsOf(file).flatMap((target) => {
        const why = wrongWay(file, target);
        return why ? [`${file} → ${target}: ${why}`] : [];
      }),
    );
    expect(found).toEqual([]);
  });

  it("finds a circle of three", () => {
    const graph = new Map([
      ["a.ts", ["b.ts"]],
      ["b.ts", ["c.ts", "d.ts"]],
      ["c.ts", ["a.ts"]],
      ["d.ts", []],
    ]);
    expect(circles(graph)).toEqual([["a.ts", "b.ts", "c.ts", "a.ts"]]);
  });

  it("has no circles", () => {
    const graph = new Map(files.map((file) => [file, importsOf(file)]));
    expect(circles(graph).map((c) => c.join(" → "))).toEqual([]);
  });
});

/** The most lines `createKubefn` may have: it composes the app's parts, and does nothing itself. */
const CREATE_KUBEFN_MAX_LINES = 100;

/** Why `file` may not import `target` across the seam; undefined when it may. */
function pastTheSeam(file: string, target: string): string | undefined {
  if (file.startsWith("functions/") && target.startsWith("shared/runtime/")) {
    return "a platform imports the runtime (take it from shared/app)";
  }
  return undefined;
}

/** Lines of the top-level function `name` in `source`, from its declaration to its closing brace. */
function functionLines(source: string, name: string): number {
  const lines = source.split("\n");
  const start = lines.findIndex((l) => new RegExp(`^export (async )?function ${name}\\b`).test(l));
  if (start < 0) throw new Error(`no top-level function ${name}`);
  const end = lines.findIndex((l, i) => i > start && l === "}");
  if (end < 0) throw new Error(`function ${name} does not close at the top level`);
  return end - start + 1;
}

describe("the seam", () => {
  const platformFiles = productionFiles("functions");

  it.each([
    [
      "functions/node/x.ts",
      "shared/runtime/index.ts",
      "a platform imports the runtime (take it from shared/app)",
    ],
    [
      "functions/aws/x.ts",
      "shared/runtime/core/types.ts",
      "a platform imports the runtime (take it from shared/app)",
    ],
    ["functions/cloudflare/x.ts", "shared/app/index.ts", undefined],
    ["functions/aws/x.ts", "shared/kube/index.ts", undefined],
    ["shared/app/x.ts", "shared/runtime/index.ts", undefined],
  ])("%s → %s: %s", (file, target, expected) => {
    expect(pastTheSeam(file, target)).toBe(expected);
  });

  it("platforms import nothing from shared/runtime", () => {
    expect(platformFiles.length).toBeGreaterThan(20);
    const found = platformFiles.flatMap((file) =>
      importsOf(file).flatMap((target) => {
        const why = pastTheSeam(file, target);
        return why ? [`${file} → ${target}: ${why}`] : [];
      }),
    );
    expect(found).toEqual([]);
  });

  it.each([
    ["export function f() {\n  return 1;\n}\n", 3],
    [
      "const x = 1;\nexport async function f(a: number) {\n  if (a) {\n    return a;\n  }\n}\nfunction g() {}\n",
      5,
    ],
  ])("counts the lines of a function: %j", (source, expected) => {
    expect(functionLines(source, "f")).toBe(expected);
  });

  it(`createKubefn is at most ${CREATE_KUBEFN_MAX_LINES} lines`, () => {
    const source = readFileSync(join(root, "shared/app/kubefn.ts"), "utf8");
    expect(functionLines(source, "createKubefn")).toBeLessThanOrEqual(CREATE_KUBEFN_MAX_LINES);
  });
});

/** Why `file` (outside `shared/runtime/`) may not import `target`; undefined when it may. */
function pastTheTopIndex(file: string, target: string): string | undefined {
  if (file.startsWith("shared/runtime/") || !target.startsWith("shared/runtime/")) return undefined;
  if (target === "shared/runtime/index.ts") return undefined;
  const test = file.endsWith(".test.ts") || !layeredFolders.some((folder) => file.startsWith(`${folder}/`));
  if (test && /^shared\/runtime\/[^/]+\/index\.ts$/.test(target)) return undefined;
  return test
    ? "a test imports a runtime room's file (take it from shared/runtime/index.ts or the room's index.ts)"
    : "imports past the runtime's top index (take it from shared/runtime/index.ts)";
}

/** Every .ts file, production or test, in the folders code lives in. */
function allSources(): string[] {
  return [...layeredFolders, "test"].flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts"))
      .map((e) => relative(root, join(e.parentPath, e.name)))
      .filter((file) => !/(^|\/)(node_modules|dist|\.wrangler)\//.test(file)),
  );
}

describe("the runtime's rooms", () => {
  it("has no module at shared/runtime's top but its index.ts", () => {
    const top = readdirSync(join(root, "shared/runtime"), { withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith(".ts"))
      .map((e) => e.name);
    expect(top).toEqual(["index.ts"]);
  });

  it.each([
    ["shared/app/x.ts", "shared/runtime/index.ts", undefined],
    [
      "shared/app/x.ts",
      "shared/runtime/pass/index.ts",
      "imports past the runtime's top index (take it from shared/runtime/index.ts)",
    ],
    [
      "shared/controllers/proxy/x.ts",
      "shared/runtime/pass/executor.ts",
      "imports past the runtime's top index (take it from shared/runtime/index.ts)",
    ],
    ["shared/app/x.test.ts", "shared/runtime/pass/index.ts", undefined],
    ["test/support/x.ts", "shared/runtime/core/index.ts", undefined],
    [
      "test/unit/x.test.ts",
      "shared/runtime/pass/executor.ts",
      "a test imports a runtime room's file (take it from shared/runtime/index.ts or the room's index.ts)",
    ],
    ["shared/runtime/pass/executor.ts", "shared/runtime/definition/controller.ts", undefined],
  ])("%s → %s: %s", (file, target, expected) => {
    expect(pastTheTopIndex(file, target)).toBe(expected);
  });

  it("is entered through its top index (tests: or a room's index)", () => {
    const files = allSources();
    expect(files.length).toBeGreaterThan(300);
    const found = files.flatMap((file) =>
      importsOf(file).flatMap((target) => {
        const why = pastTheTopIndex(file, target);
        return why ? [`${file} → ${target}: ${why}`] : [];
      }),
    );
    expect(found).toEqual([]);
  });
});

/**
 * The words that name an operator: each operator's name, its primary kind and that kind's plural
 * (its `kinds[0]`; the kinds it owns or watches — Secrets, Deployments — are Kubernetes', not its).
 */
function operatorWords(list = operators): string[] {
  const words = list.flatMap((o) => [o.name, o.kinds[0]!.kind, o.kinds[0]!.resource]);
  return [...new Set(words.map((w) => w.toLowerCase()))];
}

const isLetter = (ch: string | undefined) => ch !== undefined && /[A-Za-z]/.test(ch);
const isLower = (ch: string | undefined) => ch !== undefined && /[a-z]/.test(ch);
const isUpper = (ch: string | undefined) => ch !== undefined && /[A-Z]/.test(ch);

/**
 * The operator words of `source` as written, each where it stands as a word or a part of an
 * identifier (`kubefn-proxy-images`, `metricsPerProxy`, `SITE_MANIFESTS_DIR`, `SubPool`), not
 * inside another word (`website`, `situation`).
 */
function operatorWordsIn(source: string, words: readonly string[]): string[] {
  const found: string[] = [];
  const lower = source.toLowerCase();
  for (const word of words) {
    for (let at = lower.indexOf(word); at >= 0; at = lower.indexOf(word, at + 1)) {
      const before = source[at - 1];
      const first = source[at]!;
      const after = source[at + word.length];
      const starts = !isLetter(before) || (isLower(before) && isUpper(first));
      const ends = !isLower(after);
      if (starts && ends) {
        const tokenStart = source.slice(0, at).search(/[A-Za-z0-9_-]*$/);
        const tokenEnd = at + source.slice(at).search(/[^A-Za-z0-9_-]|$/);
        found.push(source.slice(tokenStart, tokenEnd));
      }
    }
  }
  return found;
}

/**
 * Identifiers that name an operator where they may, with the reason. The list only shrinks.
 */
const operatorWordsAllowed: Readonly<Record<string, { words: readonly string[]; why: string }>> = {
  "functions/node/dev/devcluster.ts": {
    words: ["httpProxy"],
    why: "an HTTP proxy in front of the devcluster's API server (the tests' fault proxy), not the operator",
  },
};

describe("no operator's name in the app or the platforms", () => {
  const words = operatorWords();

  it("takes the words from the operators list", () => {
    expect(words).toEqual(
      expect.arrayContaining(["proxy", "proxies", "subpool", "subpools", "site", "sites"]),
    );
  });

  it.each<[string, string[]]>([
    ['allowForKubefn(admin, "kubefn-proxy-images", k, v)', ["kubefn-proxy-images"]],
    ["config.metricsPerProxy", ["metricsPerProxy"]],
    ["import { subPoolResource } from", ["subPoolResource"]],
    ["e.SITE_MANIFESTS_DIR", ["SITE_MANIFESTS_DIR"]],
    ["// a Proxy's name, a Site's", ["Proxy", "Site"]],
    ["the Proxies of a SubPool", ["SubPool", "Proxies"]],
    ["a website, its situation, an approxy-mate", []],
  ])("finds the operator words of %j", (source, expected) => {
    expect(operatorWordsIn(source, words).sort()).toEqual(expected.sort());
  });

  it("no production module of shared/app or functions/ names an operator", () => {
    const files = [...productionFiles("shared/app"), ...productionFiles("functions")];
    expect(files.length).toBeGreaterThan(40);
    const found = files.flatMap((file) => {
      const allowed = new Set(operatorWordsAllowed[file]?.words ?? []);
      const named = operatorWordsIn(readFileSync(join(root, file), "utf8"), words).filter(
        (w) => !allowed.has(w),
      );
      return named.length > 0 ? [`${file}: ${[...new Set(named)].join(", ")}`] : [];
    });
    expect(found).toEqual([]);
  });

  it.each(Object.entries(operatorWordsAllowed))(
    "%s still needs each word it is allowed",
    (file, { words: allowed }) => {
      const named = new Set(operatorWordsIn(readFileSync(join(root, file), "utf8"), words));
      expect(allowed.filter((w) => !named.has(w))).toEqual([]);
    },
  );
});
