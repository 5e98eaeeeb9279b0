import type { ObjectKey, Resource } from "./port.ts";

/** "v1" for the core group, "apps/v1" otherwise: what goes in an object's `apiVersion`. */
export function apiVersionOf(res: Resource): string {
  return res.group === "" ? res.version : `${res.group}/${res.version}`;
}

export interface PathParts {
  /** Namespace of a namespaced resource. Omit to address every namespace (lists only). */
  namespace?: string | undefined;
  name?: string | undefined;
  subresource?: "status" | undefined;
  /** Query parameters; undefined values are left out. */
  query?: Record<string, string | number | boolean | undefined>;
}

/**
 * The API path of a collection or an object: `/api/v1/...` for the core group, `/apis/<g>/<v>/...`
 * otherwise, with `namespaces/<ns>/` for namespaced kinds. Every segment is URL-encoded.
 *
 * Caveats: a namespace given for a cluster-scoped resource is ignored (objects of cluster-scoped
 * kinds may carry a stray `metadata.namespace`); an object path of a namespaced resource without a
 * namespace throws, since the server would read it as a collection path of another kind; so does
 * a name or namespace "." or "..", which a URL parser would resolve to another path.
 */
export function resourcePath(res: Resource, parts: PathParts = {}): string {
  for (const segment of [parts.namespace, parts.name]) {
    if (segment === "." || segment === "..") {
      throw new TypeError(`${JSON.stringify(segment)} is not a valid ${res.kind} name or namespace`);
    }
  }
  const segments: string[] = res.group === "" ? ["api", res.version] : ["apis", res.group, res.version];
  if (res.namespaced && parts.namespace) segments.push("namespaces", parts.namespace);
  if (res.namespaced && !parts.namespace && parts.name !== undefined) {
    throw new TypeError(`${res.resource} "${parts.name}" is namespaced but no namespace was given`);
  }
  segments.push(res.resource);
  if (parts.name !== undefined) {
    if (parts.name === "") throw new TypeError(`empty ${res.kind} name`);
    segments.push(parts.name);
    if (parts.subresource) segments.push(parts.subresource);
  }
  const path = `/${segments.map(encodeURIComponent).join("/")}`;
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(parts.query ?? {})) {
    if (value !== undefined) query.set(key, String(value));
  }
  const qs = query.toString();
  return qs === "" ? path : `${path}?${qs}`;
}

/** The key of an object, for addressing it. */
export function keyOf(obj: { metadata: { name?: string; namespace?: string } }): ObjectKey {
  const name = obj.metadata.name;
  if (!name) throw new TypeError("object has no metadata.name");
  return obj.metadata.namespace ? { namespace: obj.metadata.namespace, name } : { name };
}

/**
 * Whether a name could belong to a stored object: what the API server enforces for every kind
 * (no "/" or "%", not "." or "..") and at most 253 characters (DNS subdomain names, the rule for
 * every kind kubefn maps). For names read from events and other untrusted input.
 */
export function isObjectName(name: string): boolean {
  return name.length > 0 && name.length <= 253 && name !== "." && name !== ".." && !/[/%]/.test(name);
}

/** A DNS-1123 label: namespace names, most other names within a namespace. */
export const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const imagePathComponent = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
/** A container image reference: `[registry[:port]/]path[:tag][@sha256:<digest>]`. */
export const imageReference = new RegExp(
  `^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?${imagePathComponent}(?:/${imagePathComponent})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);
/** A DNS-1123 subdomain: object names of most kinds, API groups, label key prefixes, hostnames. */
export const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether a namespace name is a DNS-1123 label, as the API server requires. */
export function isNamespaceName(namespace: string): boolean {
  return namespace.length <= 63 && dnsLabel.test(namespace);
}
