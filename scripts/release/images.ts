/**
 * The release's images: every kubefn image that install.yaml and the chart run, built from its
 * Containerfile and tagged with the release version (`npm run release -- --images`).
 *
 * A dry run (the default) prints one `docker buildx build` (or `podman build`) command per image
 * and writes dist/images.txt with the digests still open; `--push` runs them with `--push` and
 * fills each digest from the build's metadata (buildx) or the pushed manifest (podman).
 */
import { isImageField, kubefnImageRepository } from "../../install/index.ts";

/**
 * How each kubefn image repository is built: its Containerfile, with the repository root as the
 * build context. An image that install.yaml or the chart runs and that has no entry here fails
 * the release (and the unit test).
 */
export const IMAGE_BUILDS: Readonly<Record<string, string>> = {
  [`${kubefnImageRepository}kubefn`]: "infra/host/Containerfile",
  [`${kubefnImageRepository}relay`]: "infra/relay/Dockerfile",
  [`${kubefnImageRepository}forward-proxy`]: "infra/forward-proxy/Containerfile",
};

/** One image of the release and how it is built. */
export interface ImageBuild {
  /** `ghcr.io/kubefn/<name>:<version>`. */
  ref: string;
  repository: string;
  /** Relative to the repository root, which is the build context. */
  containerfile: string;
}

export type ContainerTool = "docker" | "podman";

/**
 * Every kubefn image reference in `objects` (`image:` fields, and environment variables naming one:
 * PROXY_POD_IMAGE), sorted, once each.
 */
export function imageRefs(objects: unknown): string[] {
  const refs = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (isImageField(node as Record<string, unknown>, key, value)) {
          refs.add(value);
        } else visit(value);
      }
    }
  };
  visit(objects);
  return [...refs].sort();
}

/** Splits `ghcr.io/kubefn/relay:0.1.0` into repository and tag (undefined for a digest or no tag). */
export function splitRef(ref: string): { repository: string; tag: string | undefined } {
  const at = ref.indexOf("@");
  if (at >= 0) return { repository: ref.slice(0, at), tag: undefined };
  const colon = ref.lastIndexOf(":");
  return colon > ref.lastIndexOf("/")
    ? { repository: ref.slice(0, colon), tag: ref.slice(colon + 1) }
    : { repository: ref, tag: undefined };
}

/**
 * The build of each reference; throws when one is not tagged with `version` or has no
 * Containerfile in {@link IMAGE_BUILDS}.
 */
export function imageBuilds(refs: readonly string[], version: string): ImageBuild[] {
  return refs.map((ref) => {
    const { repository, tag } = splitRef(ref);
    if (tag !== version) throw new Error(`image ${ref} is not tagged with the release version ${version}`);
    const containerfile = IMAGE_BUILDS[repository];
    if (!containerfile) throw new Error(`image ${ref} has no Containerfile (scripts/release/images.ts)`);
    return { ref, repository, containerfile };
  });
}

/**
 * The commands that build (and, with `push`, push) each image, from the repository root. With
 * docker, `buildx build --metadata-file <metadataDir>/<name>.json` records the pushed digest.
 */
export function buildCommands(
  builds: readonly ImageBuild[],
  opts: { tool: ContainerTool; push: boolean; metadataDir: string },
): string[][] {
  return builds.flatMap((b) => {
    if (opts.tool === "podman") {
      const build = ["podman", "build", "--file", b.containerfile, "--tag", b.ref, "."];
      return opts.push ? [build, ["podman", "push", b.ref]] : [build];
    }
    return [
      [
        "docker",
        "buildx",
        "build",
        "--file",
        b.containerfile,
        "--tag",
        b.ref,
        ...(opts.push ? ["--push", "--metadata-file", `${opts.metadataDir}/${nameOf(b)}.json`] : []),
        ".",
      ],
    ];
  });
}

/** `relay` of ghcr.io/kubefn/relay. */
export const nameOf = (b: Pick<ImageBuild, "repository">): string =>
  b.repository.split("/").at(-1) ?? "image";

/** The text of a dry run's command, as a shell would take it. */
export const commandLine = (argv: readonly string[]): string =>
  argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(" ");

/** Placeholder for a digest until a real push fills it. */
export const UNPUSHED = "(not pushed)";

/**
 * dist/images.txt: one line per image, `reference  Containerfile  digest`, the digest
 * {@link UNPUSHED} until a push recorded it.
 */
export function imagesList(
  builds: readonly ImageBuild[],
  version: string,
  digests: ReadonlyMap<string, string> = new Map(),
): string {
  const lines = builds.map((b) => `${b.ref}  ${b.containerfile}  ${digests.get(b.ref) ?? UNPUSHED}`);
  return `# kubefn ${version} images: reference  Containerfile  digest (filled by npm run release -- --images --push)\n${lines.join("\n")}\n`;
}

/** The digest a `buildx build --metadata-file` recorded (`containerimage.digest`). */
export function digestFromMetadata(json: string): string | undefined {
  const digest = (JSON.parse(json) as Record<string, unknown>)["containerimage.digest"];
  return typeof digest === "string" && /^sha256:[0-9a-f]{64}$/.test(digest) ? digest : undefined;
}
