/**
 * The objects of `install.yaml`: what `kubectl apply -k infra/` installs (every resource
 * infra/kustomization.yaml lists, in its order), plus the in-cluster Node host of `infra/host/`
 * when that folder exists, with every kubefn image pinned to the release version.
 *
 * Only the kustomize features infra/ uses are understood (resources, and patches that delete an
 * object); anything else is refused rather than silently ignored, so a kustomization that grows a
 * feature fails the release instead of shipping something `kubectl apply -k` would not.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { parse, parseAllDocuments, stringify } from "yaml";

/** A Kubernetes object as far as the release looks at it. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** Images kubefn builds and publishes; only these are pinned. */
export const kubefnImageRepository = "ghcr.io/kubefn/";

interface Kustomization {
  resources?: string[];
  patches?: Array<{ patch?: string; path?: string; target?: unknown }>;
  [k: string]: unknown;
}

const understood = new Set(["apiVersion", "kind", "resources", "patches"]);

/** `kind/namespace/name`, the identity kustomize and the API server go by. */
export const objectKey = (o: Pick<Manifest, "kind" | "metadata">): string =>
  `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;

function documentsOf(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJSON() as Manifest | null)
    .filter((o): o is Manifest => Boolean(o?.kind));
}

/**
 * Every object a kustomization directory renders, in resource order.
 * @throws Error on a kustomize feature this resolver does not implement.
 */
export function kustomizeObjects(dir: string): Manifest[] {
  const file = join(dir, "kustomization.yaml");
  const k = parse(readFileSync(file, "utf8")) as Kustomization;
  const unknown = Object.keys(k).filter((key) => !understood.has(key));
  if (unknown.length > 0) throw new Error(`${file}: kustomize field(s) not supported: ${unknown.join(", ")}`);
  const objects: Manifest[] = [];
  for (const resource of k.resources ?? []) {
    const path = join(dir, resource);
    objects.push(...(statSync(path).isDirectory() ? kustomizeObjects(path) : documentsOf(path)));
  }
  const deleted = new Set<string>();
  for (const p of k.patches ?? []) {
    const patch = (p.patch ? parse(p.patch) : undefined) as (Manifest & { $patch?: string }) | undefined;
    if (patch?.$patch !== "delete" || p.path || p.target) {
      throw new Error(`${file}: only inline "$patch: delete" patches are supported`);
    }
    deleted.add(objectKey(patch));
  }
  const kept = objects.filter((o) => !deleted.has(objectKey(o)));
  if (kept.length !== objects.length - deleted.size) {
    throw new Error(`${file}: a delete patch names an object no resource declares`);
  }
  return kept;
}

/** Replaces the tag of every kubefn image (`ghcr.io/kubefn/<name>:<tag>`) in place with `version`. */
export function pinImages(objects: Manifest[], version: string): string[] {
  const pinned: string[] = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === "object") {
      const o = node as Record<string, unknown>;
      for (const [key, value] of Object.entries(o)) {
        if (key === "image" && typeof value === "string" && value.startsWith(kubefnImageRepository)) {
          const repository = value.replace(/[@:][^/]*$/, "");
          o[key] = `${repository}:${version}`;
          pinned.push(o[key] as string);
        } else visit(value);
      }
    }
  };
  visit(objects);
  return pinned;
}

/** The CustomResourceDefinitions of `infra/crds`, in kustomization order. */
export const crdsOf = (objects: Manifest[]): Manifest[] =>
  objects.filter((o) => o.kind === "CustomResourceDefinition");

/**
 * What install.yaml holds for `version`: infra/'s kustomization, then infra/host/'s when present.
 * @example
 * const objects = installObjects(root, "0.2.0");
 */
export function installObjects(root: string, version: string): Manifest[] {
  const objects = kustomizeObjects(join(root, "infra"));
  const host = join(root, "infra/host");
  if (existsSync(join(host, "kustomization.yaml"))) {
    const seen = new Set(objects.map(objectKey));
    objects.push(...kustomizeObjects(host).filter((o) => !seen.has(objectKey(o))));
  }
  pinImages(objects, version);
  return objects;
}

/** A multi-document YAML stream, one object per document, with a header comment. */
export function toYamlStream(objects: Manifest[], header: string): string {
  const comment = header
    .trim()
    .split("\n")
    .map((l) => `# ${l}`.trimEnd())
    .join("\n");
  return `${comment}\n${objects.map((o) => `---\n${stringify(o, { lineWidth: 0 })}`).join("")}`;
}

/** The directory of this repository, from a module inside it. */
export const repositoryRoot = (): string => join(dirname(new URL(import.meta.url).pathname), "../..");
