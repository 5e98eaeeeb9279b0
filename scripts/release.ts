/**
 * `npm run release`: every artifact of one kubefn release, named by the version in package.json,
 * into dist/ (gitignored):
 *
 *   dist/install.yaml               what `kubectl apply -k infra/` installs: the cluster side every
 *                                   platform needs (CRDs, RBAC, admission policies), no process
 *   dist/host.yaml                  the in-cluster Node host (infra/host/), only where it reconciles
 *   dist/relay.yaml                 the relay (infra/relay/), only where no audit webhook delivers;
 *                                   kubefn images pinned to ghcr.io/kubefn/<name>:<version>
 *   dist/crds.yaml                  the CRDs alone, applied first on an upgrade (docs/upgrading.md)
 *   dist/cloudflare/                the Worker bundle (`wrangler deploy --dry-run --outdir`) and a
 *                                   wrangler.toml that deploys it as built
 *   dist/aws/kubefn-aws-<v>.zip     the Lambda package (functions/aws/handler.ts bundled by esbuild)
 *   dist/aws/template.yaml          its SAM template, a Parameter for every setting
 *   dist/kubefn-<v>.tgz             the Helm chart (charts/kubefn), linted first
 *   dist/SHA256SUMS                 checksums of the files above
 *
 * Usage: npm run release [-- --out <dir>] [-- --skip-worker]
 *
 * The images step, apart (it needs a container runtime, and registry credentials to push):
 *
 *   npm run release -- --images [--push] [--tool docker|podman]
 *
 * prints the build command of every kubefn image of install.yaml and the chart (its Containerfile,
 * tagged with the version; scripts/release/images.ts) and writes dist/images.txt (reference,
 * Containerfile, digest). With --push it runs them, pushing, and records each pushed digest.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { parseArgs, promisify } from "node:util";
import { parseAllDocuments } from "yaml";
import {
  crdsOf,
  hostObjects,
  inClusterIntakeUrl,
  installObjects,
  relayObjects,
  toYamlStream,
} from "../install/index.ts";
import {
  buildCommands,
  type ContainerTool,
  type Crd,
  commandLine,
  crdIncompatibilities,
  digestFromMetadata,
  type ImageBuild,
  imageBuilds,
  imageRefs,
  imagesList,
  nameOf,
  releaseTemplate,
  zip,
} from "./release/index.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

/** The helm binary built from its Go module (scripts/helm.sh builds it once into .tools/). */
export async function helmBinary(): Promise<string> {
  const { stdout } = await run("bash", [join(root, "scripts/helm.sh")], { cwd: root, maxBuffer: 1 << 24 });
  return stdout.trim();
}

/**
 * functions/aws/handler.ts bundled as infra/aws/README.md describes, to `outfile` (with its source
 * map beside it): the Lambda package's code, and what the lambda-memory bench runs.
 */
export async function bundleLambdaHandler(outfile: string): Promise<void> {
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
      `--outfile=${outfile}`,
      "--log-level=error",
      "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    ],
    { cwd: root },
  );
}

/** The Lambda package: the handler bundled ({@link bundleLambdaHandler}), zipped. */
async function lambdaZip(out: string, version: string): Promise<string> {
  const build = join(out, "aws/build");
  await bundleLambdaHandler(join(build, "index.mjs"));
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
  for (const part of [
    "install.yaml",
    "host.yaml",
    "relay.yaml",
    "crds.yaml",
    "cloudflare",
    "aws",
    "SHA256SUMS",
  ]) {
    await rm(join(out, part), { recursive: true, force: true });
  }
  await mkdir(join(out, "aws"), { recursive: true });

  const objects = installObjects(root, version);
  refuseIncompatibleCrds(crdsOf(objects) as unknown as Crd[]);
  await writeFile(
    join(out, "install.yaml"),
    toYamlStream(
      objects,
      `kubefn ${version}: kubectl apply --server-side -f install.yaml (or: kubefn install)\n` +
        "The cluster side every platform needs: CRDs, RBAC, admission policies. No process: add\n" +
        "host.yaml where the Node host reconciles in the cluster, relay.yaml where no audit webhook delivers.",
    ),
  );
  await writeFile(
    join(out, "host.yaml"),
    toYamlStream(
      hostObjects(root, version),
      `kubefn ${version}, the in-cluster Node host: kubectl apply --server-side -f host.yaml\n` +
        "after install.yaml (or: kubefn install --platform node). Not on a cluster a Worker or Lambda reconciles.",
    ),
  );
  await writeFile(
    join(out, "relay.yaml"),
    toYamlStream(
      relayObjects(root, version),
      `kubefn ${version}, the relay, posting to ${inClusterIntakeUrl}: for a cluster without an\n` +
        "audit webhook. kubefn install --relay [--intake-url <url>] applies it and makes its Secret; by hand,\n" +
        "create relay-secret in Secret kubefn-system/kubefn-intake first (infra/relay/manifests.yaml).",
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
      ["install.yaml", "host.yaml", "relay.yaml", "crds.yaml", `kubefn-${version}.tgz`].includes(f) ||
      /^(aws|cloudflare)\//.test(f),
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

/** The objects the chart renders with its default values and `args` (at the chart's appVersion). */
export async function chartObjects(helm: string, args: string[] = []): Promise<unknown[]> {
  const { stdout } = await run(
    helm,
    ["template", "kubefn", join(root, "charts/kubefn"), "--kube-version", "1.30.0", ...args],
    {
      maxBuffer: 1 << 26,
    },
  );
  return parseAllDocuments(stdout)
    .map((d) => d.toJSON() as unknown)
    .filter(Boolean);
}

/**
 * Every kubefn image of install.yaml and the chart, and those no manifest names (the forward
 * proxy), and how each is built (throws on one without).
 */
export async function releaseImages(version: string, helm: string): Promise<ImageBuild[]> {
  const refs = imageRefs([
    installObjects(root, version),
    hostObjects(root, version),
    relayObjects(root, version),
    // Every process the chart can run: the host and the relay.
    await chartObjects(helm, ["--set", "host.enabled=true,relay.enabled=true"]),
  ]);
  return imageBuilds(refs, version);
}

/**
 * The images step: writes `out`/images.txt and returns the commands; runs them when `push`
 * (each image built and pushed; the digests recorded in images.txt).
 */
export async function images(opts: {
  out: string;
  push: boolean;
  tool: ContainerTool;
}): Promise<{ commands: string[][]; builds: ImageBuild[] }> {
  const { version } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string };
  const builds = await releaseImages(version, await helmBinary());
  const metadataDir = join(opts.out, "images");
  const commands = buildCommands(builds, { tool: opts.tool, push: opts.push, metadataDir });
  await mkdir(opts.out, { recursive: true });
  const digests = new Map<string, string>();
  if (opts.push) {
    await mkdir(metadataDir, { recursive: true });
    for (const [command, ...args] of commands) {
      await run(command as string, args, { cwd: root, maxBuffer: 1 << 26 });
    }
    for (const b of builds) {
      const digest =
        opts.tool === "docker"
          ? digestFromMetadata(await readFile(join(metadataDir, `${nameOf(b)}.json`), "utf8"))
          : (
              await run("podman", ["image", "inspect", "--format", "{{.Digest}}", b.ref], { cwd: root })
            ).stdout.trim();
      if (!digest) throw new Error(`no digest was recorded for ${b.ref}`);
      digests.set(b.ref, digest);
    }
  }
  await writeFile(join(opts.out, "images.txt"), imagesList(builds, version, digests));
  return { commands, builds };
}

if (import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      out: { type: "string", default: join(root, "dist") },
      "skip-worker": { type: "boolean" },
      images: { type: "boolean" },
      push: { type: "boolean" },
      tool: { type: "string", default: "docker" },
    },
  });
  const out = values.out as string;
  if (values.images) {
    const tool = values.tool as string;
    if (tool !== "docker" && tool !== "podman")
      throw new Error(`--tool must be docker or podman, not ${tool}`);
    const push = values.push === true;
    const { commands } = await images({ out, push, tool });
    if (!push) console.log("# dry run: the build commands (run from the repository root; --push runs them)");
    for (const c of commands) console.log(commandLine(c));
    console.log(relative(root, join(out, "images.txt")));
  } else {
    const written = await release({ out, worker: !values["skip-worker"] });
    for (const f of written) console.log(relative(root, join(out, f)));
  }
}
