import { errorMessage } from "../../../guards/index.ts";
import type { Kube, KubeObject, ObjectMeta, Resource } from "../../../kube/index.ts";
import { classifyError, isAlreadyExists, isConflict, isNotFound, Resources } from "../../../kube/index.ts";
import { releaseImage } from "../../../release.ts";
import {
  adoptExisting,
  type CreateRequest,
  type DeleteGuard,
  type Instance,
  type InstanceState,
  isOwnedBy,
  isRbacRefusal,
  type ListScope,
  NamespaceNotOptedInError,
  ownerTagKey,
  type Provider,
  ProviderError,
  ProviderNotFoundError,
  requireOwnerTag,
  type Tag,
} from "./provider.ts";

export const podResource: Resource = Resources.Pod;
export const secretResource: Resource = Resources.Secret;
/** Where the Pod mounts its cloud-init Secret; the user data is the file `user-data` in it. */
export const cloudInitMountPath = "/var/lib/cloud/seed/nocloud";
const cloudInitKey = "user-data";

/**
 * The image when the Proxy names none and PROXY_POD_IMAGE is unset: this release's forward proxy
 * (infra/forward-proxy), listening on 3128. By tag; the release's manifests pin it by digest.
 */
export const defaultPodImage = releaseImage("forward-proxy");
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
    securityContext?: Record<string, unknown>;
    volumes?: { name: string; secret?: { secretName: string; defaultMode?: number } }[];
    containers: {
      name: string;
      image: string;
      ports?: { name?: string; containerPort: number; protocol?: string }[];
      env?: { name: string; value: string }[];
      volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
      securityContext?: Record<string, unknown>;
    }[];
  };
  status?: { phase?: string; podIP?: string };
}

export interface KubernetesProviderOptions {
  kube: Kube;
  /** Overrides {@link defaultPodImage} (PROXY_POD_IMAGE). */
  defaultImage?: string;
}

/** The Secret holding one instance's cloud-init, controlled by its Pod. */
export interface CloudInitSecret extends KubeObject {
  apiVersion: "v1";
  kind: "Secret";
  metadata: ObjectMeta & { name: string; namespace: string };
  type: "Opaque";
  immutable: true;
  data: Record<string, string>;
}

/**
 * The pod provider: each instance is a Pod in the Proxy's namespace. For development clusters and
 * tests; the Pod plays the part of a VM (no restarts). Cloud-init travels in a Secret the Pod
 * mounts (`<pod>-cloud-init`, controlled by the Pod, so it goes with it), never in the Pod spec:
 * whoever may read Pods (the built-in `view` role) must not read Secret bytes through them.
 *
 * @example
 * const providers = { kubernetes: createKubernetesProvider({ kube: ctx.kube }) };
 */
export function createKubernetesProvider(opts: KubernetesProviderOptions): Provider {
  const { kube } = opts;
  const defaultImage = opts.defaultImage ?? defaultPodImage;

  async function readPod(id: string): Promise<Instance> {
    const key = parsePodProviderId(id);
    try {
      return instanceFromPod(await kube.get<Pod>(podResource, key));
    } catch (err) {
      if (isNotFound(err)) throw new ProviderNotFoundError(id, { cause: err });
      throw providerErrorFromKube(err, `get pod ${key.namespace}/${key.name}`, key.namespace);
    }
  }

  async function get(id: string, owner: string): Promise<Instance> {
    const instance = await readPod(id);
    if (!isOwnedBy(instance, owner, sanitiseLabelValue))
      throw new ProviderNotFoundError(id, { notOwnedBy: owner });
    return instance;
  }

  /**
   * Creates the Pod's cloud-init Secret, controlled by the Pod. A leftover of the same name (the
   * Secret of a predecessor the garbage collector has not removed yet) is deleted, UID-guarded,
   * and created again; a Secret of that name that is not this provider's is a NameConflict.
   */
  async function ensureCloudInitSecret(pod: Pod, cloudInit: string): Promise<void> {
    const secret = buildCloudInitSecret(pod, cloudInit);
    const key = { namespace: secret.metadata.namespace, name: secret.metadata.name };
    const what = `create secret ${key.namespace}/${key.name}`;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await kube.create<CloudInitSecret>(secretResource, secret);
        return;
      } catch (err) {
        if (!isAlreadyExists(err)) throw providerErrorFromKube(err, what, key.namespace);
      }
      let existing: KubeObject;
      try {
        existing = await kube.get(secretResource, key);
      } catch (err) {
        if (isNotFound(err)) continue;
        throw providerErrorFromKube(err, what, key.namespace);
      }
      const controller = existing.metadata.ownerReferences?.find((r) => r.controller);
      if (controller?.uid === pod.metadata.uid) return;
      const ownTag = pod.metadata.labels?.[ownerTagKey] ?? "";
      if (ownTag === "" || existing.metadata.labels?.[ownerTagKey] !== ownTag) {
        throw new ProviderError(
          "permanent",
          "NameConflict",
          `${what}: a Secret of that name exists and is not ours`,
        );
      }
      try {
        await kube.delete(secretResource, key, { preconditions: { uid: existing.metadata.uid ?? "" } });
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) throw providerErrorFromKube(err, what, key.namespace);
      }
    }
    throw new ProviderError("transient", "Conflict", `${what}: raced with another writer`);
  }

  return {
    namespaced: true,

    async create(req) {
      const owner = requireOwnerTag(req);
      const pod = buildPod(req, defaultImage);
      const what = `create pod ${req.namespace}/${req.name}`;
      let created: Pod;
      try {
        created = await kube.create<Pod>(podResource, pod);
      } catch (err) {
        if (!isAlreadyExists(err)) throw providerErrorFromKube(err, what, req.namespace);
        let existing: Pod;
        try {
          existing = await kube.get<Pod>(podResource, { namespace: req.namespace, name: req.name });
        } catch (getErr) {
          // Deleted between our create and get: the next pass creates it again.
          if (isNotFound(getErr)) {
            throw new ProviderError("transient", "Conflict", `pod ${req.name} vanished during create`, {
              cause: getErr,
            });
          }
          throw providerErrorFromKube(getErr, what, req.namespace);
        }
        adoptExisting(instanceFromPod(existing), sanitiseLabelValue(owner), req.name, err);
        created = existing;
      }
      // After the Pod, so that the Secret can be controlled by it (and a pass that died in between
      // is completed by the next one, which adopts the Pod). Until it exists the Pod waits.
      if (req.cloudInit !== undefined) await ensureCloudInitSecret(created, req.cloudInit);
      return instanceFromPod(created);
    },

    get,

    async delete(id: string, guard: DeleteGuard) {
      const key = parsePodProviderId(id);
      const what = `delete pod ${key.namespace}/${key.name}`;
      let instance: Instance;
      try {
        instance = await readPod(id);
      } catch (err) {
        if (err instanceof ProviderNotFoundError) return;
        throw err;
      }
      if (!isOwnedBy(instance, guard.owner, sanitiseLabelValue)) return;
      if (guard.uid !== undefined && instance.uid !== guard.uid) return;
      try {
        await kube.delete(podResource, key, { preconditions: { uid: instance.uid ?? "" } });
      } catch (err) {
        // Gone, or a successor under the same name (the UID precondition failed): not ours to delete.
        if (isNotFound(err) || isConflict(err)) return;
        throw providerErrorFromKube(err, what, key.namespace);
      }
    },

    /** In `scope.namespace`, or in every namespace (which needs kubefn-tenant bound cluster-wide). */
    async listByTag(tag: Tag, scope?: ListScope) {
      const labelSelector = `${sanitiseLabelKey(tag.key)}=${sanitiseLabelValue(tag.value)}`;
      const namespace = scope?.namespace;
      const instances: Instance[] = [];
      let cont: string | undefined;
      try {
        do {
          const page = await kube.list<Pod>(podResource, {
            ...(namespace ? { namespace } : {}),
            labelSelector,
            limit: 500,
            continue: cont,
          });
          instances.push(...page.items.map(instanceFromPod));
          cont = page.continue || undefined;
        } while (cont);
      } catch (err) {
        const where = namespace ? ` in ${namespace}` : " in all namespaces";
        throw providerErrorFromKube(err, `list pods ${labelSelector}${where}`, namespace ?? "");
      }
      return instances;
    },
  };
}

/** The name of the cloud-init Secret of the Pod named `podName`. */
export function cloudInitSecretName(podName: string): string {
  return `${podName}-cloud-init`;
}

/**
 * The Pod for a create request. Pure. Labels are the shape's labels, sanitised to label syntax,
 * then the tags (valid as they are): sanitised after the overlay, a tenant's key that sanitises to
 * a tag's key (`crawl.kubefn.dev/proxy-uid-`) would overwrite it and tag the instance as another
 * Proxy's. Cloud-init is a read-only Secret volume at {@link cloudInitMountPath}
 * (file `user-data`), never an env var: the Pod spec carries no Secret bytes. The Pod runs
 * unprivileged: no ServiceAccount token, non-root, no privilege escalation, every capability
 * dropped, the runtime's default seccomp profile.
 *
 * Caveats: `restartPolicy: Never` is deliberate — a dead instance shows as Stopped and the
 * reconciler replaces it, as it would a VM.
 */
export function buildPod(req: CreateRequest, defaultImage: string = defaultPodImage): Pod {
  const tenant = Object.entries(sanitiseLabels(req.instance.labels ?? {})).filter(
    ([key]) => !platformLabelKey(key),
  );
  const labels = { ...Object.fromEntries(tenant), ...req.tags };
  const withCloudInit = req.cloudInit !== undefined;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: req.name, namespace: req.namespace, labels },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: "RuntimeDefault" } },
      ...(withCloudInit
        ? {
            volumes: [
              {
                name: "cloud-init",
                secret: { secretName: cloudInitSecretName(req.name), defaultMode: 0o400 },
              },
            ],
          }
        : {}),
      containers: [
        {
          name: "proxy",
          image: req.instance.image || defaultImage,
          ports: [{ name: "proxy", containerPort: proxyPort, protocol: "TCP" }],
          ...(withCloudInit
            ? { volumeMounts: [{ name: "cloud-init", mountPath: cloudInitMountPath, readOnly: true }] }
            : {}),
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        },
      ],
    },
  };
}

/**
 * The cloud-init Secret of a created Pod: labelled like the Pod (owner tags), controlled by it (the
 * garbage collector deletes it with the Pod), immutable. Pure.
 */
export function buildCloudInitSecret(pod: Pod, cloudInit: string): CloudInitSecret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: cloudInitSecretName(pod.metadata.name),
      namespace: pod.metadata.namespace,
      labels: { ...pod.metadata.labels },
      ownerReferences: [
        {
          apiVersion: "v1",
          kind: "Pod",
          name: pod.metadata.name,
          uid: pod.metadata.uid ?? "",
          controller: true,
        },
      ],
    },
    type: "Opaque",
    immutable: true,
    data: { [cloudInitKey]: base64Of(cloudInit) },
  };
}

function base64Of(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
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
    ...(pod.metadata.uid ? { uid: pod.metadata.uid } : {}),
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
 * A conflict cannot be resolved here by re-reading, so it becomes transient. RBAC's refusal in
 * `namespace` (given when the call was in one) is {@link NamespaceNotOptedInError}.
 */
export function providerErrorFromKube(err: unknown, what: string, namespace?: string): ProviderError {
  if (err instanceof ProviderError) return err;
  if (namespace !== undefined && isRbacRefusal(err))
    return new NamespaceNotOptedInError(namespace, what, err);
  const cls = classifyError(err);
  const errorClass = cls.class === "conflict" ? "transient" : cls.class;
  const message = errorMessage(err);
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

/**
 * A label key the platform acts on: kubefn's own domain (its tags are put on by the provider) and
 * the Kubernetes domains (`kubernetes.io`, `k8s.io` and their subdomains, but the recommended
 * `app.kubernetes.io`). A tenant's `spec.instance.labels` never set one on an instance Pod, and the
 * API server refuses them on kubefn's Pods (`kubefn-pods-are-proxy-instances`). Pure.
 */
export function platformLabelKey(key: string): boolean {
  const slash = key.indexOf("/");
  if (slash < 0) return false;
  const prefix = key.slice(0, slash);
  if (prefix === "app.kubernetes.io") return false;
  return (
    prefix === "crawl.kubefn.dev" ||
    ["kubernetes.io", "k8s.io"].some((domain) => prefix === domain || prefix.endsWith(`.${domain}`))
  );
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
