/**
 * `npm run release`: every artifact of one kubefn release, named by the version in package.json,
 * into dist/ (gitignored):
 *
 *   dist/install.yaml               what `kubectl apply -k infra/` installs (and infra/host/ when
 *                                   present), kubefn images pinned to ghcr.io/kubefn/<name>:<version>
 *   dist/crds.yaml                  the CRDs alone, applied first on an upgrade (docs/upgrading.md)
 *   dist/cloudflare/                the Worker bundle (`wrangler deploy --dry-run --outdir`) and a
 *                                   wrangler.toml that deploys it as built
 *   dist/aws/kubefn-aws-<v>.zip     the Lambda package (functions/aws/handler.ts bundled by esbuild)
 *   dist/aws/template.yaml          its SAM template, a Parameter for every setting
 *   dist/kubefn-<v>.tgz             the Helm chart (charts/kubefn), linted first
 *   dist/SHA256SUMS                 checksums of the files above
 *
 * Usage: npm run release [-- --out <dir>] [-- --skip-worker]
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { parseArgs, promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import { type Crd, crdIncompatibilities } from "./release/crd-compat.ts";
import { crdsOf, installObjects, toYamlStream } from "./release/install-manifest.ts";
import { releaseTemplate } from "./release/sam-template.ts";
import { zip } from "./release/zip.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

/** The helm binary built from its Go module (scripts/helm.sh builds it once into .tools/). */
export async function helmBinary(): Promise<string> {
  const { stdout } = await run("bash", [join(root, "scripts/helm.sh")], { cwd: root, maxBuffer: 1 << 24 });
  return stdout.trim();
}

/** The Lambda package: the handler bundled as infra/aws/README.md describes, zipped. */
async function lambdaZip(out: string, version: string): Promise<string> {
  const build = join(out, "aws/build");
  await run(
    join(root, "node_modules/.bin/esbuild"),
    [
      "functions/aws/handler.ts",
      "--bundle",
      "--minify",
      "--sourcemap",
      "--platform=node",
      "--target=node22",
      "--format=esm",
      `--outfile=${join(build, "index.mjs")}`,
      "--log-level=error",
      "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    ],
    { cwd: root },
  );
  const name = `kubefn-aws-${version}.zip`;
  const files = await Promise.all(
    ["index.mjs", "index.mjs.map"].map(async (f) => ({ name: f, data: await readFile(join(build, f)) })),
  );
  await writeFile(join(out, "aws", name), zip(files));
  await rm(build, { recursive: true, force: true });
  return name;
}

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true });
  const found: string[] = [];
  for (const e of entries.sort()) if ((await stat(join(dir, e))).isFile()) found.push(e);
  return found;
}

/**
 * wrangler.toml for the bundle as built: `main` is worker.js beside it, uploaded as it is
 * (`no_bundle`), and no build step. Deploy with `wrangler deploy --config dist/cloudflare/wrangler.toml`.
 */
export function prebuiltWorkerConfig(config: string): string {
  const main = /^main = .*$/m;
  const build = /^\[build\]\n(?:[^[\n].*\n|\n)*/m;
  if (!main.test(config) || !build.test(config))
    throw new Error("wrangler.toml: no main or [build] to replace");
  return config.replace(main, 'main = "worker.js"\nno_bundle = true').replace(build, "");
}

/**
 * Throws when the CRDs are not compatible with the newest release recorded under
 * test/fixtures/crds/ (the test does the same; the release will not ship what it would fail).
 */
export function refuseIncompatibleCrds(current: Crd[], recorded = join(root, "test/fixtures/crds")): void {
  const newest = readdirSync(recorded)
    .sort((a, b) => a.localeCompare(b, "en", { numeric: true }))
    .at(-1);
  if (!newest) return;
  const previous = readdirSync(join(recorded, newest))
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) =>
      parseAllDocuments(readFileSync(join(recorded, newest, f), "utf8")).map((d) => d.toJSON() as Crd),
    )
    .filter((c) => c?.metadata);
  const problems = crdIncompatibilities(previous, current);
  if (problems.length > 0) {
    throw new Error(
      `the CRDs break release ${newest}'s (add a new API version instead):\n${problems.join("\n")}`,
    );
  }
}

/** Builds the release into `out`; returns the files written, relative to it. */
export async function release(opts: { out: string; worker?: boolean }): Promise<string[]> {
  const { version } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string };
  const { out } = opts;
  for (const part of ["install.yaml", "crds.yaml", "cloudflare", "aws", "SHA256SUMS"]) {
    await rm(join(out, part), { recursive: true, force: true });
  }
  await mkdir(join(out, "aws"), { recursive: true });

  const objects = installObjects(root, version);
  refuseIncompatibleCrds(crdsOf(objects) as unknown as Crd[]);
  await writeFile(
    join(out, "install.yaml"),
    toYamlStream(
      objects,
      `kubefn ${version}: kubectl apply --server-side -f install.yaml\n` +
        "CRDs, RBAC, admission policies, the relay (create its Secret first: infra/relay/manifests.yaml).",
    ),
  );
  await writeFile(
    join(out, "crds.yaml"),
    toYamlStream(crdsOf(objects), `kubefn ${version} CRDs: kubectl apply --server-side -f crds.yaml`),
  );

  if (opts.worker !== false) {
    await run(
      join(root, "node_modules/.bin/wrangler"),
      ["deploy", "--dry-run", "--outdir", join(out, "cloudflare"), "--config", join(root, "wrangler.toml")],
      { cwd: root, env: { ...process.env, WRANGLER_SEND_METRICS: "false" }, maxBuffer: 1 << 24 },
    );
    const config = await readFile(join(root, "wrangler.toml"), "utf8");
    await writeFile(join(out, "cloudflare/wrangler.toml"), prebuiltWorkerConfig(config));
  }

  const codeUri = await lambdaZip(out, version);
  const base = await readFile(join(root, "infra/aws/template.yaml"), "utf8");
  await writeFile(join(out, "aws/template.yaml"), releaseTemplate(base, { codeUri, version }));

  const helm = await helmBinary();
  const chart = join(root, "charts/kubefn");
  await rm(join(out, `kubefn-${version}.tgz`), { force: true });
  await run(helm, ["lint", "--strict", chart]);
  await run(helm, ["package", chart, "--destination", out, "--version", version, "--app-version", version]);

  const written = (await files(out)).filter((f) => !f.startsWith("worker-src/") && f !== "SHA256SUMS");
  const artifacts = written.filter(
    (f) =>
      ["install.yaml", "crds.yaml", `kubefn-${version}.tgz`].includes(f) || /^(aws|cloudflare)\//.test(f),
  );
  const sums = await Promise.all(
    artifacts.map(
      async (f) =>
        `${createHash("sha256")
          .update(await readFile(join(out, f)))
          .digest("hex")}  ${f}`,
    ),
  );
  await writeFile(join(out, "SHA256SUMS"), `${sums.join("\n")}\n`);
  return [...artifacts, "SHA256SUMS"];
}

if (import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({
    options: { out: { type: "string", default: join(root, "dist") }, "skip-worker": { type: "boolean" } },
  });
  const out = values.out as string;
  const written = await release({ out, worker: !values["skip-worker"] });
  for (const f of written) console.log(relative(root, join(out, f)));
}
