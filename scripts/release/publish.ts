/**
 * Publishing a release (the steps .github/workflows/release.yml runs on a tag), after
 * `npm run release` built dist/:
 *
 *   1. images   each kubefn image of install.yaml and the chart, multi-arch (docker buildx,
 *               linux/amd64 and linux/arm64), pushed, its digest recorded (dist/images.txt)
 *   2. pin      host.yaml, relay.yaml and the chart's values pinned to those digests
 *               (`ghcr.io/kubefn/<name>:<version>@sha256:…`), the chart repackaged, SHA256SUMS again
 *   3. sbom     an SPDX JSON SBOM of each pushed image (syft), into dist/sbom/
 *   4. chart    the chart pushed to an OCI registry (`helm push … oci://ghcr.io/kubefn/charts`)
 *      npm      the CLI's package (scripts/release/cli-package.ts) published, with provenance
 *   5. sign     cosign, keyless (the workflow's OIDC identity): each image by digest, its SBOM as
 *               an attestation, the chart by digest, and SHA256SUMS as a Sigstore bundle
 *
 * Usage: node --import tsx scripts/release/publish.ts [--dry-run] [--out dist] [--digests <file>]
 *
 * `--dry-run` (what runs outside CI, with no registry and no network) prints every command the
 * steps would run, in order, runs none of them, and does locally what needs no registry: with
 * `--digests <file>` (images.txt's format) the pin step really rewrites dist/'s files and
 * repackages the chart, and the CLI's package is packed, so what would be published can be read. Without `--dry-run` it runs the
 * commands; pushing needs registry credentials, signing an OIDC token (GitHub Actions' own).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import { parseDocument } from "yaml";
import { cliPackage } from "./cli-package.ts";
import { commandLine, type ImageBuild, nameOf, UNPUSHED } from "./images.ts";

const run = promisify(execFile);

/** The platforms every kubefn image is built for. */
export const PLATFORMS = ["linux/amd64", "linux/arm64"] as const;

/** Where the chart is pushed (`helm push … oci://ghcr.io/kubefn/charts` → ghcr.io/kubefn/charts/kubefn). */
export const CHART_REGISTRY = "oci://ghcr.io/kubefn/charts";

/** Digests by image reference, from dist/images.txt (`reference  Containerfile  digest`). */
export function readDigests(imagesTxt: string): Map<string, string> {
  const digests = new Map<string, string>();
  for (const line of imagesTxt.split("\n")) {
    if (line.startsWith("#") || line.trim() === "") continue;
    const [ref, , ...rest] = line.trim().split(/\s{2,}/);
    const digest = rest.join(" ");
    if (!ref || digest === UNPUSHED) continue;
    if (!/^sha256:[0-9a-f]{64}$/.test(digest))
      throw new Error(`images.txt: ${ref} has no digest but "${digest}"`);
    digests.set(ref, digest);
  }
  return digests;
}

/**
 * `text` (a YAML stream) with every `image: <ref>` of `digests`, and every environment variable's
 * `value: <ref>` (PROXY_POD_IMAGE), pinned as `<ref>@<digest>`.
 *
 * @throws when a kubefn image (`ghcr.io/kubefn/…`) in `text` has no digest: a release never ships
 * one by tag alone.
 */
export function pinManifest(text: string, digests: ReadonlyMap<string, string>): string {
  return text.replace(
    /^(\s*(?:- )?(?:image|value):\s*)(["']?)(ghcr\.io\/kubefn\/[^\s"'@]+)\2\s*$/gm,
    (_, lead, q, ref) => {
      const digest = digests.get(ref);
      if (!digest) throw new Error(`${ref} has no digest to pin`);
      return `${lead}${q}${ref}@${digest}${q}`;
    },
  );
}

/**
 * The chart's values.yaml with `host.image.digest` and `relay.image.digest` set to the digests of
 * `ghcr.io/kubefn/kubefn:<version>` and `ghcr.io/kubefn/relay:<version>` (its comments kept).
 */
export function pinChartValues(
  values: string,
  digests: ReadonlyMap<string, string>,
  version: string,
): string {
  const doc = parseDocument(values);
  for (const [key, name] of [
    ["host", "kubefn"],
    ["relay", "relay"],
  ] as const) {
    const ref = `ghcr.io/kubefn/${name}:${version}`;
    const digest = digests.get(ref);
    if (!digest) throw new Error(`${ref} has no digest to pin the chart's ${key}.image to`);
    if (!doc.hasIn([key, "image", "digest"]))
      throw new Error(`the chart's values have no ${key}.image.digest`);
    doc.setIn([key, "image", "digest"], digest);
  }
  if (!doc.hasIn(["settings", "values", "PROXY_POD_IMAGE"]))
    throw new Error("the chart's values have no settings.values.PROXY_POD_IMAGE");
  doc.setIn(["settings", "values", "PROXY_POD_IMAGE"], forwardProxyPinned(digests, version));
  return doc.toString();
}

/** `ghcr.io/kubefn/forward-proxy:<version>@<digest>`: PROXY_POD_IMAGE as the release pins it. */
export function forwardProxyPinned(digests: ReadonlyMap<string, string>, version: string): string {
  const ref = `ghcr.io/kubefn/forward-proxy:${version}`;
  const digest = digests.get(ref);
  if (!digest) throw new Error(`${ref} has no digest to pin PROXY_POD_IMAGE to`);
  return `${ref}@${digest}`;
}

/** The SAM template with the ProxyPodImage Parameter's default pinned (its comments kept). */
export function pinTemplate(template: string, digests: ReadonlyMap<string, string>, version: string): string {
  const doc = parseDocument(template);
  if (!doc.hasIn(["Parameters", "ProxyPodImage"])) throw new Error("the SAM template has no ProxyPodImage");
  doc.setIn(["Parameters", "ProxyPodImage", "Default"], forwardProxyPinned(digests, version));
  return doc.toString();
}

/** The Worker's wrangler.toml with PROXY_POD_IMAGE pinned in its [vars]. */
export function pinWorkerConfig(
  config: string,
  digests: ReadonlyMap<string, string>,
  version: string,
): string {
  if (!/^\[vars\]$/m.test(config)) throw new Error("wrangler.toml has no [vars]");
  const line = `PROXY_POD_IMAGE = "${forwardProxyPinned(digests, version)}"`;
  return /^PROXY_POD_IMAGE = .*$/m.test(config)
    ? config.replace(/^PROXY_POD_IMAGE = .*$/m, line)
    : config.replace(/^\[vars\]$/m, `[vars]\n${line}`);
}

/** The build of every image, for both platforms, pushed, its digest written to the metadata file. */
export function multiArchBuilds(builds: readonly ImageBuild[], metadataDir: string): string[][] {
  return builds.map((b) => [
    "docker",
    "buildx",
    "build",
    "--platform",
    PLATFORMS.join(","),
    "--file",
    b.containerfile,
    "--tag",
    b.ref,
    "--provenance=mode=max",
    "--push",
    "--metadata-file",
    `${metadataDir}/${nameOf(b)}.json`,
    ".",
  ]);
}

/** Every command the steps after the images run, given the digests (placeholders in a dry run without). */
export function publishPlan(opts: {
  builds: readonly ImageBuild[];
  digests: ReadonlyMap<string, string>;
  version: string;
  out: string;
}): { step: string; argv: string[] }[] {
  const { builds, digests, version, out } = opts;
  const byDigest = (b: ImageBuild) => `${b.repository}@${digests.get(b.ref) ?? `<digest of ${b.ref}>`}`;
  const chart = join(out, `kubefn-${version}.tgz`);
  const chartRef = `${CHART_REGISTRY.replace(/^oci:\/\//, "")}/kubefn`;
  return [
    ...builds.map((b) => ({
      step: "sbom",
      argv: [
        "syft",
        "scan",
        `registry:${byDigest(b)}`,
        "-o",
        `spdx-json=${join(out, "sbom", `${nameOf(b)}.spdx.json`)}`,
      ],
    })),
    { step: "chart", argv: ["helm", "push", chart, CHART_REGISTRY] },
    // The CLI (scripts/release/cli-package.ts), with npm's provenance statement of this workflow.
    {
      step: "npm",
      argv: [
        "npm",
        "publish",
        join(out, "npm", `kubefn-${version}.tgz`),
        "--provenance",
        "--access",
        "public",
      ],
    },
    ...builds.flatMap((b) => [
      { step: "sign", argv: ["cosign", "sign", "--yes", byDigest(b)] },
      {
        step: "sign",
        argv: [
          "cosign",
          "attest",
          "--yes",
          "--type",
          "spdxjson",
          "--predicate",
          join(out, "sbom", `${nameOf(b)}.spdx.json`),
          byDigest(b),
        ],
      },
    ]),
    // The chart's digest is what `helm push` printed ("Digest: sha256:…"); the workflow passes it on.
    { step: "sign", argv: ["cosign", "sign", "--yes", `${chartRef}@<digest helm push printed>`] },
    {
      step: "sign",
      argv: [
        "cosign",
        "sign-blob",
        "--yes",
        "--bundle",
        join(out, "SHA256SUMS.sigstore.json"),
        join(out, "SHA256SUMS"),
      ],
    },
  ];
}

/**
 * Pins dist/'s host.yaml, relay.yaml, the chart, and PROXY_POD_IMAGE of the SAM template and the
 * Worker's wrangler.toml to `digests`, repackaging the chart; SHA256SUMS again. */
export async function pinRelease(opts: {
  out: string;
  version: string;
  digests: ReadonlyMap<string, string>;
  helm: string;
}): Promise<string[]> {
  const { out, version, digests, helm } = opts;
  const written: string[] = [];
  for (const f of ["host.yaml", "relay.yaml"]) {
    const path = join(out, f);
    await writeFile(path, pinManifest(await readFile(path, "utf8"), digests));
    written.push(f);
  }
  const template = join(out, "aws/template.yaml");
  if (existsSync(template)) {
    await writeFile(template, pinTemplate(await readFile(template, "utf8"), digests, version));
    written.push("aws/template.yaml");
  }
  const wrangler = join(out, "cloudflare/wrangler.toml");
  if (existsSync(wrangler)) {
    await writeFile(wrangler, pinWorkerConfig(await readFile(wrangler, "utf8"), digests, version));
    written.push("cloudflare/wrangler.toml");
  }
  const tgz = join(out, `kubefn-${version}.tgz`);
  const work = await mkdtemp(join(tmpdir(), "kubefn-chart-"));
  try {
    await run("tar", ["-xzf", tgz, "-C", work]);
    const values = join(work, "kubefn/values.yaml");
    await writeFile(values, pinChartValues(await readFile(values, "utf8"), digests, version));
    await run(helm, ["lint", "--strict", join(work, "kubefn")]);
    await run(helm, [
      "package",
      join(work, "kubefn"),
      "--destination",
      out,
      "--version",
      version,
      "--app-version",
      version,
    ]);
    written.push(`kubefn-${version}.tgz`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  await rewriteSums(out);
  return [...written, "SHA256SUMS"];
}

/** SHA256SUMS again, for the files it lists (their pinned contents). */
async function rewriteSums(out: string): Promise<void> {
  const sums = await readFile(join(out, "SHA256SUMS"), "utf8");
  const lines = await Promise.all(
    sums
      .split("\n")
      .filter(Boolean)
      .map(async (l) => {
        const file = l.replace(/^[0-9a-f]{64}\s+/, "");
        return `${createHash("sha256")
          .update(await readFile(join(out, file)))
          .digest("hex")}  ${file}`;
      }),
  );
  await writeFile(join(out, "SHA256SUMS"), `${lines.join("\n")}\n`);
}

if (import.meta.filename === process.argv[1]) {
  const root = join(import.meta.dirname, "../..");
  const { values } = parseArgs({
    options: {
      "dry-run": { type: "boolean" },
      out: { type: "string", default: join(root, "dist") },
      digests: { type: "string" },
    },
  });
  const dryRun = values["dry-run"] === true;
  const out = values.out as string;
  const { version } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string };
  const { helmBinary, releaseImages } = await import("../release.ts");
  const helm = await helmBinary();
  const builds = await releaseImages(version, helm);
  const metadataDir = join(out, "images");
  const say = (step: string, argv: string[]) =>
    console.log(`${dryRun ? "# would run " : ""}[${step}] ${commandLine(argv)}`);
  let chartDigest: string | undefined;
  const exec = async (step: string, argv: string[]) => {
    say(step, argv);
    if (dryRun) return;
    const r = await run(argv[0] as string, argv.slice(1), { cwd: root, maxBuffer: 1 << 26 });
    if (step === "chart") chartDigest = /Digest: (sha256:[0-9a-f]{64})/.exec(r.stdout + r.stderr)?.[1];
  };

  for (const argv of multiArchBuilds(builds, metadataDir)) {
    if (!dryRun) await mkdir(metadataDir, { recursive: true });
    await exec("images", argv);
  }
  let digests = new Map<string, string>();
  if (values.digests) digests = readDigests(await readFile(values.digests, "utf8"));
  else if (!dryRun) {
    const { digestFromMetadata, imagesList } = await import("./images.ts");
    for (const b of builds) {
      const digest = digestFromMetadata(await readFile(join(metadataDir, `${nameOf(b)}.json`), "utf8"));
      if (!digest) throw new Error(`no digest was recorded for ${b.ref}`);
      digests.set(b.ref, digest);
    }
    await writeFile(join(out, "images.txt"), imagesList(builds, version, digests));
  }
  if (digests.size > 0) {
    const pinned = await pinRelease({ out, version, digests, helm });
    console.log(`[pin] ${pinned.map((f) => join(out, f)).join(" ")} pinned to ${digests.size} digests`);
  } else {
    console.log(
      "# [pin] no digests (a dry run without --digests): host.yaml, relay.yaml and the chart stay unpinned",
    );
  }
  const cli = await cliPackage(out);
  console.log(`[npm] ${cli}: the CLI's package, packed`);
  for (const { step, argv: planned } of publishPlan({ builds, digests, version, out })) {
    if (step === "sbom" && !dryRun) await mkdir(join(out, "sbom"), { recursive: true });
    const argv = planned.map((a) => (chartDigest ? a.replace("<digest helm push printed>", chartDigest) : a));
    if (!dryRun && argv.some((a) => a.includes("<"))) {
      throw new Error(`${commandLine(argv)}: a value is missing (run the workflow's step for it)`);
    }
    await exec(step, argv);
  }
  if (dryRun)
    console.log(`# dry run: nothing pushed or signed; ${(await readdir(out)).length} entries in ${out}`);
}
