/**
 * The `kubefn` CLI as an npm package users run with `npx`: cli/main.ts bundled by esbuild into one
 * ESM file (its dependencies inside it, so the package declares none and needs no tsx), beside the
 * infra/ manifests it installs from (the files `kubectl apply -k infra/` reads), and a
 * package.json with `bin` and `files`. `npm pack` makes `kubefn-<version>.tgz` of it.
 *
 * Usage: node --import tsx scripts/release/cli-package.ts [--out dist]   → dist/npm/kubefn-<v>.tgz
 *
 * Caveats: the bundle's `import.meta.dirname` is the package's bin/, so the CLI finds package.json
 * and infra/ one folder up, as it does in a checkout (cli/ beside infra/).
 */
import { execFile } from "node:child_process";
import { cp, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { parseArgs, promisify } from "node:util";
import { build } from "esbuild";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");

/** The folders of infra/ the CLI reads (install.yaml's kustomization and what it names). */
const INFRA = ["kustomization.yaml", "crds", "rbac", "host", "relay", "audit", "monitoring"];

/** Builds the package into `<out>/npm/kubefn` and packs it; returns the tarball's path. */
export async function cliPackage(out: string): Promise<string> {
  const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as {
    version: string;
    description: string;
    engines: Record<string, string>;
  };
  const dir = join(out, "npm/kubefn");
  await rm(join(out, "npm"), { recursive: true, force: true });
  await mkdir(join(dir, "bin"), { recursive: true });
  await build({
    stdin: {
      contents: 'import { run } from "./cli/main.ts";\nawait run(process.argv.slice(2));\n',
      resolveDir: root,
      sourcefile: "kubefn.ts",
      loader: "ts",
    },
    bundle: true,
    platform: "node",
    target: "node22",
    format: "esm",
    outfile: join(dir, "bin/kubefn.mjs"),
    // main.ts runs itself when it is the process's script; in the bundle the entry above does.
    define: { "import.meta.filename": '""' },
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
    logLevel: "error",
  });
  for (const entry of INFRA) {
    await cp(join(root, "infra", entry), join(dir, "infra", entry), { recursive: true, dereference: true });
  }
  // Only manifests: no tests or sources of the processes that live beside them in infra/.
  for (const f of await readdir(join(dir, "infra"), { recursive: true, withFileTypes: true })) {
    if (f.isFile() && !/\.(ya?ml|json)$/.test(f.name)) await rm(join(f.parentPath, f.name));
  }
  await writeFile(
    join(dir, "package.json"),
    `${JSON.stringify(
      {
        name: "kubefn",
        version: pkg.version,
        description: pkg.description,
        type: "module",
        bin: { kubefn: "bin/kubefn.mjs" },
        files: ["bin", "infra"],
        engines: pkg.engines,
      },
      null,
      2,
    )}\n`,
  );
  const { stdout } = await run("npm", ["pack", "--pack-destination", join(out, "npm"), "--json"], {
    cwd: dir,
    env: { ...process.env, npm_config_offline: "true", npm_config_update_notifier: "false" },
  });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
  if (!packed) throw new Error("npm pack made nothing");
  return join(out, "npm", packed.filename);
}

if (import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({ options: { out: { type: "string", default: join(root, "dist") } } });
  console.log(relative(root, await cliPackage(values.out as string)));
}
