/**
 * kubefn's rights inside a SubPool's Namespace: none cluster-wide on what a pool derives there
 * (ConfigMaps, Secrets, Services, ServiceAccounts, StatefulSets, NetworkPolicies, …), only the
 * ClusterRole {@link subPoolObjectsRole}, which kubefn binds to itself in each Namespace it made.
 * A stolen kubefn token therefore reads none of these kinds in a tenant's namespace, and lists
 * none of them across the cluster; the admission policy kubefn-writes-only-its-own admits the
 * binding only in a `subpool-*` Namespace carrying kubefn's pool labels.
 */
import type { Kube } from "../../kube/index.ts";
import { ForbiddenError, isAlreadyExists, ReconcileError, Resources } from "../../kube/index.ts";

/** The ClusterRole kubefn binds to itself in each SubPool's Namespace: what the pool derives there. */
export const subPoolObjectsRole = "kubefn-subpool-objects";

/** Tries of a call RBAC refuses after the grant (50 ms more between each: 1.75 s in all). */
const grantAttempts = 8;

/**
 * How long the first call inside a Namespace waits after a binding the pass made: about as long
 * as the authorizer takes to see a new RoleBinding on a loaded API server, so that call is seldom
 * refused (a refused call is one request more, and the retry waits 50 ms anyway).
 */
export const bindingSettleMs = 100;

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether `err` is RBAC's refusal (not an admission policy's, which names no verb and resource). */
function refusedByRbac(err: unknown): boolean {
  return err instanceof ForbiddenError && /\bcannot [a-z]+ resource\b/.test(err.message);
}

/**
 * Binds {@link subPoolObjectsRole} to kubefn's own identity in `namespace` (create first; one
 * that exists is kept). `labels` are the pool's (the admission policy admits only a labelled one).
 *
 * Caveats: the subject is the ServiceAccount kubefn-system/kubefn, the identity the admission
 * policy kubefn-writes-only-its-own admits as the only subject of the only RoleBinding kubefn
 * writes; kubefn running as another identity needs that RoleBinding made for it.
 */
export async function grantSubPoolObjects(
  kube: Kube,
  namespace: string,
  labels: Record<string, string>,
): Promise<void> {
  try {
    await kube.create(Resources.RoleBinding, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: subPoolObjectsRole, namespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: subPoolObjectsRole },
      subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
    });
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/**
 * `kube` for one pass's calls inside a SubPool's Namespace: a call RBAC refuses there (a Namespace
 * of an earlier version, the binding deleted, or one not in force yet) makes the binding — once a
 * pass — and is tried again, waiting up to 1.75 s for the authorizer to take it in; past that, a
 * transient error (`SubPoolAccessPending`), which the executor's backoff retries. Calls outside
 * `namespace` go through unchanged. `granted` says the pass made the binding already: it may not
 * be in force yet, so the first call inside goes out alone and the others wait until it has
 * settled — one call, not each of a parallel batch, is refused while the authorizer takes the
 * binding in.
 *
 * Caveats: where the Namespace does not exist, the binding's NotFound is what the call throws
 * (a read of an object in it finds nothing either).
 *
 * Regression: a new pool's 9 creates, sent at once right after its binding, were each refused
 * and tried again while the binding was not in force — 3.3 refused creates a pool in a loaded
 * fleet bench; then the first one alone, sent at once, still 0.34–0.62 a pool (issue 33).
 */
export function grantedKube(
  kube: Kube,
  namespace: string,
  labels: Record<string, string>,
  granted = false,
  sleep: (ms: number) => Promise<void> = pause,
): Kube {
  let grant: Promise<void> | undefined = granted ? Promise.resolve() : undefined;
  /** The first call after a binding this pass made: the others inside wait until it settled. */
  let probing: Promise<unknown> | undefined;
  const inside = (ns: string | undefined) => ns === namespace;
  const retried = async <T>(ns: string | undefined, call: () => Promise<T>): Promise<T> => {
    if (!inside(ns)) return call();
    if (granted && probing === undefined) {
      const probe = sleep(bindingSettleMs).then(() => tried(call));
      probing = probe.catch(() => undefined);
      return probe;
    }
    if (probing) await probing;
    return tried(call);
  };
  const tried = async <T>(call: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (!refusedByRbac(err)) throw err;
        const first = grant === undefined;
        grant ??= grantSubPoolObjects(kube, namespace, labels);
        await grant;
        if (first) continue;
        if (attempt >= grantAttempts) {
          throw new ReconcileError(
            "transient",
            "SubPoolAccessPending",
            `${namespace}: RoleBinding ${subPoolObjectsRole} made, not in force yet`,
            { cause: err },
          );
        }
        await sleep(50 * attempt);
      }
    }
  };
  return {
    get: (res, key) => retried(key.namespace, () => kube.get(res, key)),
    list: (res, opts) => retried(opts?.namespace, () => kube.list(res, opts)),
    create: (res, obj, opts) => retried(obj.metadata.namespace, () => kube.create(res, obj, opts)),
    update: (res, obj, opts) => retried(obj.metadata.namespace, () => kube.update(res, obj, opts)),
    patch: (res, key, patch, opts) => retried(key.namespace, () => kube.patch(res, key, patch, opts)),
    delete: (res, key, opts) => retried(key.namespace, () => kube.delete(res, key, opts)),
    updateStatus: (res, obj, opts) =>
      retried(obj.metadata.namespace, () => kube.updateStatus(res, obj, opts)),
    patchStatus: (res, key, patch, opts) =>
      retried(key.namespace, () => kube.patchStatus(res, key, patch, opts)),
  };
}
