/**
 * Removing the namespaces a test file made in the shared devcluster, before the next file starts
 * (test/setup/leak-check.ts fails a file that leaves one behind).
 */
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { isNotFound, type Kube, listAll, type Resource, Resources } from "../../shared/kube/index.ts";

/**
 * Deletes the namespaces `names` and waits until every one is gone, calling `tick` between looks
 * (e.g. a Worker's cron run).
 *
 * Caveats: a namespace goes only once the finalizers of the objects in it are off. Call it while
 * the kubefn that put them there still runs (before stopping the host), so that its passes take
 * them off; a host that neither sweeps nor gets events will not notice the deletion.
 *
 * @example
 * await removeNamespaces(admin, [ns]);
 * await host.stop();
 */
export async function removeNamespaces(
  kube: Kube,
  names: readonly string[],
  {
    timeoutMs = 120_000,
    tick,
    dropFinalizers = false,
  }: {
    timeoutMs?: number;
    tick?: () => Promise<unknown>;
    /**
     * Take the finalizers off the Proxies in them directly, for a file that ran passes by hand
     * and has no kubefn running at its end: their pod-provider instances (Pods, Secrets) go with
     * the namespace.
     */
    dropFinalizers?: boolean;
  } = {},
): Promise<void> {
  const exists = (name: string) =>
    kube.get(Resources.Namespace, { name }).then(
      () => true,
      (err: unknown) => (isNotFound(err) ? false : Promise.reject(err)),
    );
  await Promise.all(
    names.map((name) =>
      kube.delete(Resources.Namespace, { name }).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      }),
    ),
  );
  const deadline = Date.now() + timeoutMs;
  let left = [...names];
  for (;;) {
    const there = await Promise.all(left.map(exists));
    left = left.filter((_, i) => there[i]);
    if (left.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`namespaces still there ${timeoutMs} ms after their deletion: ${left.join(", ")}`);
    if (dropFinalizers) await Promise.all(left.map((namespace) => dropProxyFinalizers(kube, namespace)));
    await tick?.();
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function dropProxyFinalizers(kube: Kube, namespace: string): Promise<void> {
  for (const p of await listAll(kube, proxyResource, { namespace })) {
    if ((p.metadata.finalizers ?? []).length === 0) continue;
    await kube
      .patch(
        proxyResource,
        { namespace, name: p.metadata.name! },
        { type: "merge", body: { metadata: { finalizers: null } } },
      )
      .catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      });
  }
}

/**
 * Deletes `key` at once (grace period 0) and waits until the API server no longer has it: an
 * attack's object removed before the next assertion, so nothing else (another file's orphan
 * sweep) meets it. Not found is already done.
 */
export async function deleteNow(
  kube: Kube,
  res: Resource,
  key: { namespace?: string; name: string },
): Promise<void> {
  try {
    await kube.delete(res, key, { gracePeriodSeconds: 0 });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  for (;;) {
    try {
      await kube.get(res, key);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Waits until the namespace's `default` ServiceAccount exists: the API server refuses every Pod
 * in a namespace whose ServiceAccount is missing (403, from its ServiceAccount admission plugin),
 * so a test that expects a Pod admitted — or refused by a policy, not for that — waits first. The
 * controller that makes it is slow on a loaded machine right after the control plane starts.
 *
 * @example
 * await waitForDefaultServiceAccount(admin, ns);
 */
export async function waitForDefaultServiceAccount(kube: Kube, namespace: string): Promise<void> {
  for (;;) {
    try {
      await kube.get(Resources.ServiceAccount, { namespace, name: "default" });
      return;
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
