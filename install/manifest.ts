/**
 * The objects of `install.yaml`: what `kubectl apply -k infra/` installs (every resource
 * infra/kustomization.yaml lists, in its order: the cluster side), and apart from it the
 * in-cluster Node host of `infra/host/` and the relay of `infra/relay/`, with every kubefn image
 * pinned to the release version.
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

/**
 * Whether `o[key]` names a kubefn image: an `image:` field, or the value of a container's
 * environment variable that names one (PROXY_POD_IMAGE, the forward proxy's image).
 */
export function isImageField(o: Record<string, unknown>, key: string, value: unknown): value is string {
  if (typeof value !== "string" || !value.startsWith(kubefnImageRepository)) return false;
  return key === "image" || (key === "value" && typeof o.name === "string");
}

/** Replaces the tag of every kubefn image (`ghcr.io/kubefn/<name>:<tag>`) in place with `version`. */
export function pinImages(objects: Manifest[], version: string): string[] {
  const pinned: string[] = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === "object") {
      const o = node as Record<string, unknown>;
      for (const [key, value] of Object.entries(o)) {
        if (isImageField(o, key, value)) {
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
 * What install.yaml holds for `version`: infra/'s kustomization — the cluster side every platform
 * needs (CRDs, the Namespace, kubefn's ServiceAccount and RBAC, the admission policies), and no
 * process: a cluster reconciled by a Worker or a Lambda wants no second reconciler in a Pod. The
 * in-cluster host ({@link hostObjects}) and the relay ({@link relayObjects}) are chosen apart.
 * @example
 * const objects = installObjects(root, "0.2.0");
 */
export function installObjects(root: string, version: string): Manifest[] {
  const objects = kustomizeObjects(join(root, "infra"));
  pinImages(objects, version);
  return objects;
}

/** Where the in-cluster host's intake listens: its Service (infra/host/deployment.yaml). */
export const inClusterIntakeUrl = "http://kubefn.kubefn-system.svc:8080/v1/events";

/**
 * The in-cluster Node host of `infra/host/` (Deployment, PodDisruptionBudget, Service), pinned to
 * `version`; none when this checkout has no infra/host/.
 */
export function hostObjects(root: string, version: string): Manifest[] {
  const host = join(root, "infra/host");
  if (!existsSync(join(host, "kustomization.yaml"))) return [];
  const objects = kustomizeObjects(host);
  pinImages(objects, version);
  return objects;
}

type Container = { name: string; env?: Array<{ name: string; value?: string }> };

/**
 * The relay of `infra/relay/` (without its Namespace, which the cluster side has), pinned to
 * `version`, posting to `intakeUrl` (default: the in-cluster host's Service). It signs with
 * `relay-secret` of Secret kubefn-system/kubefn-intake, the key the in-cluster host checks with:
 * one Secret, which the installer makes (`kubefn install --relay`, the chart).
 * @throws Error when `intakeUrl` is not an http(s) URL.
 */
export function relayObjects(root: string, version: string, intakeUrl = inClusterIntakeUrl): Manifest[] {
  const url = new URL(intakeUrl);
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error(`the relay's intake URL must be http(s), not ${intakeUrl}`);
  }
  const objects = structuredClone(kustomizeObjects(join(root, "infra/relay")));
  pinImages(objects, version);
  for (const o of objects) {
    if (o.kind !== "Deployment") continue;
    const containers = (o as unknown as { spec: { template: { spec: { containers: Container[] } } } }).spec
      .template.spec.containers;
    for (const c of containers) {
      for (const e of c.env ?? []) if (e.name === "KUBEFN_INTAKE_URL") e.value = url.href;
    }
  }
  return objects;
}

/** What one install puts in the cluster beyond the cluster side. */
export interface InstallProfile {
  /** The in-cluster Node host (`--platform node`, the chart's host.enabled). */
  host: boolean;
  /** The relay and where it posts; absent where an audit webhook or an audit log export delivers. */
  relay?: { intakeUrl: string };
}

/** The objects of `profile`, in install order: the cluster side, then the host, then the relay. */
export function profileObjects(root: string, version: string, profile: InstallProfile): Manifest[] {
  return [
    ...installObjects(root, version),
    ...(profile.host ? hostObjects(root, version) : []),
    ...(profile.relay ? relayObjects(root, version, profile.relay.intakeUrl) : []),
  ];
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
export const repositoryRoot = (): string => join(dirname(new URL(import.meta.url).pathname), "..");
