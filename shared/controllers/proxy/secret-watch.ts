import { listAll, Resources } from "../../kube/index.ts";
import type { Request, Watch } from "../../runtime/index.ts";
import { proxyResource } from "./api.ts";

/**
 * Secret → the Proxies in its namespace whose `spec.cloudInit.secretRef.name` names it. Rotating
 * a cloud-init Secret changes the spec hash, so the pass this causes replaces the instance.
 *
 * Caveats: works from the key alone (audit events on Secrets carry no body). Lists the Proxies of
 * one namespace per Secret change; Secrets nobody references map to nothing.
 */
export function proxiesForSecret(controller: string): Watch {
  return {
    resource: Resources.Secret,
    async map(ctx, change) {
      const namespace = change.key.namespace;
      if (!namespace) return [];
      const proxies = await listAll(ctx.kube, proxyResource, { namespace });
      const requests: Request[] = [];
      for (const p of proxies) {
        const spec = p.spec as { cloudInit?: { secretRef?: { name?: unknown } } } | undefined;
        if (spec?.cloudInit?.secretRef?.name === change.key.name && p.metadata.name) {
          requests.push({ controller, namespace, name: p.metadata.name });
        }
      }
      return requests;
    },
  };
}
