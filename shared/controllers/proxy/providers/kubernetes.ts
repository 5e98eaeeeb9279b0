import type { Kube, KubeObject, ObjectMeta, Resource } from "../../../kube/index.ts";
import { classifyError, isAlreadyExists, isNotFound, Resources } from "../../../kube/index.ts";
import {
  adoptExisting,
  type CreateRequest,
  type Instance,
  type InstanceState,
  type Provider,
  ProviderError,
  ProviderNotFoundError,
  requireOwnerTag,
  type Tag,
} from "./provider.ts";

export const podResource: Resource = Resources.Pod;

/** The image when the Proxy names none: a plain forward proxy listening on 3128. */
export const defaultPodImage = "ghcr.io/kubefn/forward-proxy:latest";
export const proxyPort = 3128;
const providerIdPrefix = "kubernetes://";

/** The fields of a Pod the provider reads and writes. */
export interface Pod extends KubeObject {
  apiVersion: "v1";
  kind: "Pod";
  metadata: ObjectMeta & { name: string; namespace: string };
  spec?: {
    restartPolicy?: string;
    automountServiceAccountToken?: boolean;
    containers: {
      name: string;
      image: string;
      ports?: { name?: string; containerPort: number; protocol?: string }[];
      env?: { name: string; value: string }[];
    }[];
  };
  status?: { phase?: string; podIP?: string };
}

export interface KubernetesProviderOptions {
  kube: Kube;
  /** Overrides {@link defaultPodImage}. */
  defaultImage?: string;
}

/**
 * The pod provider: each instance is a Pod in the Proxy's namespace. For development clusters and
 * tests; the Pod plays the part of a VM (no restarts, cloud-init handed over as an env var).
 *
 * @example
 * const providers = { kubernetes: createKubernetesProvider({ kube: ctx.kube }) };
 */
export function createKubernetesProvider(opts: KubernetesProviderOptions): Provider {
  const { kube } = opts;
  const defaultImage = opts.defaultImage ?? defaultPodImage;

  async function get(id: string): Promise<Instance> {
    const key = parsePodProviderId(id);
    try {
      return instanceFromPod(await kube.get<Pod>(podResource, key));
    } catch (err) {
      if (isNotFound(err)) throw new ProviderNotFoundError(id, { cause: err });
      throw providerErrorFromKube(err, `get pod ${key.namespace}/${key.name}`);
    }
  }

  return {
    async create(req) {
      const owner = requireOwnerTag(req);
      const pod = buildPod(req, defaultImage);
      try {
        return instanceFromPod(await kube.create<Pod>(podResource, pod));
      } catch (err) {
        const what = `create pod ${req.namespace}/${req.name}`;
        if (!isAlreadyExists(err)) throw providerErrorFromKube(err, what);
        const id = podProviderId(req.namespace, req.name);
        let existing: Instance;
        try {
          existing = await get(id);
        } catch (getErr) {
          // Deleted between our create and get: the next pass creates it again.
          if (getErr instanceof ProviderNotFoundError) {
            throw new ProviderError("transient", "Conflict", `pod ${req.name} vanished during create`, {
              cause: getErr,
            });
          }
          throw getErr;
        }
        return adoptExisting(existing, sanitiseLabelValue(owner), req.name, err);
      }
    },

    get,

    async delete(id) {
      const key = parsePodProviderId(id);
      try {
        await kube.delete(podResource, key);
      } catch (err) {
        if (isNotFound(err)) return;
        throw providerErrorFromKube(err, `delete pod ${key.namespace}/${key.name}`);
      }
    },

    async listByTag(tag: Tag) {
      const labelSelector = `${sanitiseLabelKey(tag.key)}=${sanitiseLabelValue(tag.value)}`;
      const instances: Instance[] = [];
      let cont: string | undefined;
      try {
        do {
          const page = await kube.list<Pod>(podResource, { labelSelector, limit: 500, continue: cont });
          instances.push(...page.items.map(instanceFromPod));
          cont = page.continue || undefined;
        } while (cont);
      } catch (err) {
        throw providerErrorFromKube(err, `list pods ${labelSelector}`);
      }
      return instances;
    },
  };
}

/**
 * The Pod for a create request. Pure. Labels are the shape's labels overlaid with the tags, both
 * sanitised to label syntax; cloud-init travels as the `CLOUD_INIT` env var.
 *
 * Caveats: `restartPolicy: Never` is deliberate — a dead instance shows as Stopped and the
 * reconciler replaces it, as it would a VM. The cloud-init is readable by anyone who may read
 * the Pod; acceptable for this development provider.
 */
export function buildPod(req: CreateRequest, defaultImage: string = defaultPodImage): Pod {
  const labels = sanitiseLabels({ ...req.instance.labels, ...req.tags });
  const env = req.cloudInit === undefined ? [] : [{ name: "CLOUD_INIT", value: req.cloudInit }];
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: req.name, namespace: req.namespace, labels },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      containers: [
        {
          name: "proxy",
          image: req.instance.image || defaultImage,
          ports: [{ name: "proxy", containerPort: proxyPort, protocol: "TCP" }],
          ...(env.length > 0 ? { env } : {}),
        },
      ],
    },
  };
}

/** What a Pod means as an instance. Pure. */
export function instanceFromPod(pod: Pod): Instance {
  const state = podState(pod);
  const ip = state === "Running" ? pod.status?.podIP : undefined;
  return {
    id: podProviderId(pod.metadata.namespace, pod.metadata.name),
    state,
    ...(ip ? { ip } : {}),
    tags: { ...pod.metadata.labels },
    ...(pod.metadata.creationTimestamp ? { createdAt: pod.metadata.creationTimestamp } : {}),
  };
}

function podState(pod: Pod): InstanceState {
  if (pod.metadata.deletionTimestamp) return "Terminating";
  switch (pod.status?.phase) {
    case "Running":
      // Running without an address yet is still on its way.
      return pod.status.podIP ? "Running" : "Provisioning";
    case "Succeeded":
    case "Failed":
      return "Stopped";
    default:
      // "", Pending, Unknown (node unreachable): keep polling.
      return "Provisioning";
  }
}

export function podProviderId(namespace: string, name: string): string {
  return `${providerIdPrefix}${namespace}/${name}`;
}

export function parsePodProviderId(id: string): { namespace: string; name: string } {
  const rest = id.startsWith(providerIdPrefix) ? id.slice(providerIdPrefix.length) : undefined;
  const [namespace, name, extra] = rest?.split("/") ?? [];
  if (!namespace || !name || extra !== undefined) {
    throw new ProviderError("permanent", "InvalidProviderID", `not a pod providerID: ${JSON.stringify(id)}`);
  }
  return { namespace, name };
}

/**
 * Wraps a Kube error as a {@link ProviderError}, classified by shared/kube's `classifyError`:
 * "exceeded quota" → quota; 5xx, 429, timeouts, network → transient; other 4xx → permanent.
 * A conflict cannot be resolved here by re-reading, so it becomes transient.
 */
export function providerErrorFromKube(err: unknown, what: string): ProviderError {
  if (err instanceof ProviderError) return err;
  const cls = classifyError(err);
  const errorClass = cls.class === "conflict" ? "transient" : cls.class;
  const message = err instanceof Error ? err.message : String(err);
  return new ProviderError(errorClass, cls.reason, `${what}: ${message}`, {
    cause: err,
    retryAfterSeconds: cls.retryAfterSeconds,
  });
}

const labelMax = 63;
const subdomainMax = 253;

/**
 * A label value from any string: characters outside `[A-Za-z0-9._-]` become "-", at most 63
 * characters, starting and ending alphanumeric (possibly empty).
 */
export function sanitiseLabelValue(value: string): string {
  return trimToAlphanumeric(value.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, labelMax));
}

/**
 * A label key from any string: an optional DNS-subdomain prefix (lowercased) and a name
 * sanitised like a value. Returns "" when nothing usable remains.
 */
export function sanitiseLabelKey(key: string): string {
  const slash = key.lastIndexOf("/");
  const name = sanitiseLabelValue(slash >= 0 ? key.slice(slash + 1) : key);
  if (slash < 0 || name === "") return name;
  const prefix = key
    .slice(0, slash)
    .toLowerCase()
    .split(".")
    .map((part) => trimToAlphanumeric(part.replace(/[^a-z0-9-]/g, "-")))
    .filter((part) => part !== "")
    .join(".")
    .slice(0, subdomainMax)
    .replace(/[.-]+$/, "");
  return prefix === "" ? name : `${prefix}/${name}`;
}

/** Sanitises keys and values; keys that sanitise to nothing are dropped. */
export function sanitiseLabels(labels: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    const k = sanitiseLabelKey(key);
    if (k !== "") out[k] = sanitiseLabelValue(value);
  }
  return out;
}

function trimToAlphanumeric(s: string): string {
  return s.replace(/^[^A-Za-z0-9]+/, "").replace(/[^A-Za-z0-9]+$/, "");
}
