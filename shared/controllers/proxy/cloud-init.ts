/**
 * cloud-init resolution and the spec hash. The hash covers what shapes the instance (provider,
 * instance shape, the *resolved* user data), so rotating a referenced Secret replaces the
 * instance even though the Proxy spec is untouched.
 */

import { hmacSha256 } from "../../auth/index.ts";
import type { Kube, KubeObject } from "../../kube/index.ts";
import { isNotFound, ReconcileError, Resources, specHash } from "../../kube/index.ts";
import { ProxyReason, type ProxySpec } from "./api.ts";
import { isRbacRefusal, NamespaceNotOptedInError } from "./providers/index.ts";

/** The Secret key read when `secretRef.key` is not set. */
export const defaultCloudInitKey = "user-data";

/**
 * Version prefix of the hash stored in the spec-hash annotation. A value without it was written
 * by someone else (the original Go operator) and is treated as missing: the instance is adopted,
 * not replaced, when a cluster switches to kubefn.
 */
export const specHashPrefix = "v2:";

/**
 * A Secret of this type holds a ServiceAccount's token: never cloud-init, whoever named it (a
 * Proxy made before the admission policy `kubefn-references-need-access`, or by an admin).
 */
const serviceAccountTokenType = "kubernetes.io/service-account-token";

/** The resolved user data; `undefined` when the spec has no cloudInit. */
export interface ResolvedCloudInit {
  userData: string | undefined;
  /** The UID of the Secret it came from; keys its digest in the spec hash (see {@link proxySpecHash}). */
  secretUID?: string | undefined;
}

/**
 * Reads the user data: inline, or from the referenced Secret in the Proxy's namespace.
 *
 * @throws ReconcileError (transient, reason CloudInitError) when the Secret or its key is missing,
 * or the Secret is a ServiceAccount token Secret (never delivered): a condition and a retry, never
 * a crash. The Secret watch brings the pass back as soon as the
 * Secret appears. NamespaceNotOptedInError when RBAC refuses the read (the namespace did not opt
 * in). Other API failures are thrown as they are (the executor classifies them).
 */
export async function resolveCloudInit(
  kube: Kube,
  namespace: string,
  spec: Pick<ProxySpec, "cloudInit">,
): Promise<ResolvedCloudInit> {
  // The schema allows exactly one of inline and secretRef.
  const ref = spec.cloudInit?.secretRef;
  if (!ref) return { userData: spec.cloudInit?.inline };
  const key = ref.key ?? defaultCloudInitKey;
  const what = `cloud-init Secret ${namespace}/${ref.name}`;
  let secret: KubeObject & { type?: string; data?: Record<string, string> };
  try {
    secret = await kube.get(Resources.Secret, { namespace, name: ref.name });
  } catch (err) {
    if (isNotFound(err)) throw new CloudInitError(`${what} not found`, err);
    if (isRbacRefusal(err)) throw new NamespaceNotOptedInError(namespace, `get ${what}`, err);
    throw err;
  }
  if (secret.type === serviceAccountTokenType) {
    throw new CloudInitError(`${what} is a ServiceAccount token`);
  }
  const encoded = secret.data?.[key];
  if (encoded === undefined) throw new CloudInitError(`${what} has no key "${key}"`);
  return { userData: decodeBase64(encoded), secretUID: secret.metadata.uid };
}

/** A cloud-init that cannot be resolved yet; transient, with reason {@link ProxyReason.CloudInitError}. */
export class CloudInitError extends ReconcileError {
  override name = "CloudInitError";
  constructor(message: string, cause?: unknown) {
    super("transient", ProxyReason.CloudInitError, message, { cause });
  }
}

export function isCloudInitError(err: unknown): err is CloudInitError {
  return err instanceof CloudInitError;
}

/**
 * What the spec hash covers: the provider, the instance shape and the resolved user data. Pure.
 *
 * Caveats: mode, endpoint and healthCheck are left out on purpose — editing a probe must not
 * replace a VM. Changing this shape changes every hash and replaces every instance: bump
 * {@link specHashPrefix} instead of editing it in place.
 */
export function specHashInput(
  spec: Pick<ProxySpec, "provider" | "instance">,
  cloudInit: ResolvedCloudInit,
): unknown {
  return {
    provider: spec.provider ?? null,
    instance: spec.instance ?? null,
    cloudInit: cloudInit.userData ?? null,
  };
}

/**
 * The annotation value for a spec and its resolved cloud-init: `v2:` and a SHA-256.
 *
 * User data from a Secret enters the hash only as an HMAC-SHA256 keyed with the Secret's UID:
 * the annotation is readable by anyone who may read the Proxy (`view`), and a plain hash of the
 * Secret's bytes would let them confirm a guess offline. The UID is visible only to those who may
 * read the Secret itself. (v1 hashed the bytes unkeyed; a v1 value is adopted, not replaced.)
 *
 * Caveats: re-creating the Secret with the same bytes changes its UID, so the instance is replaced.
 */
export async function proxySpecHash(
  spec: Pick<ProxySpec, "provider" | "instance">,
  cloudInit: ResolvedCloudInit,
): Promise<string> {
  const keyed: ResolvedCloudInit =
    cloudInit.secretUID === undefined || cloudInit.userData === undefined
      ? cloudInit
      : { userData: `hmac-sha256:${await hmacHex(cloudInit.secretUID, cloudInit.userData)}` };
  return `${specHashPrefix}${await specHash(specHashInput(spec, keyed))}`;
}

async function hmacHex(key: string, text: string): Promise<string> {
  const mac = await hmacSha256(key, text);
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

function decodeBase64(encoded: string): string {
  const binary = atob(encoded);
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}
