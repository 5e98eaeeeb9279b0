import { isRecord } from "../../guards/index.ts";
import { emptyProbeAllowList, type ProbeAllowList } from "../../health/index.ts";
import type { KubeObject } from "../../kube/index.ts";
import { ReconcileError } from "../../kube/index.ts";
import type { PassContext } from "../../runtime/index.ts";
import { failed, type Outcome } from "../../runtime/index.ts";
import * as z from "../../zod/index.ts";
import type { InstanceAllowList } from "./allow-list.ts";
import { ProxyMode, type ProxyStatus, parseProxy } from "./api.ts";
import { reconcileDelete } from "./delete.ts";
import { reconcileExternal } from "./external.ts";
import { reconcileManaged } from "./managed.ts";
import type { ProvidersByName } from "./providers/index.ts";
import { applyProbeTimeout, computePhase, stampAt } from "./status.ts";
import type { ProxyTimings } from "./timings.ts";

/** Providers fixed at start-up, or built per pass from its context (e.g. the pod provider on `ctx.kube`). */
export type ProvidersSource = ProvidersByName | ((ctx: PassContext) => ProvidersByName);

/**
 * One pass over one Proxy (seed §2): dispatch on deletion, then mode; whatever the branch did,
 * recompute `status.phase`. The executor writes the status once, only if it changed.
 *
 * Caveats: an object that fails the schema (it escaped or predates the CRD) is a permanent error
 * reason InvalidSpec; nothing is written and the next spec edit retries.
 */
export async function reconcileProxy(
  ctx: PassContext,
  object: KubeObject,
  deps: {
    providers: ProvidersSource;
    timings: ProxyTimings;
    allowList: InstanceAllowList;
    probeAllowList?: ProbeAllowList;
  },
): Promise<Outcome> {
  const parsed = parseProxy(object);
  if (!parsed.success) {
    return failed(ReconcileError.permanent("InvalidSpec", z.prettifyError(parsed.error)));
  }
  const status: ProxyStatus = isRecord(object.status) ? (object.status as ProxyStatus) : {};
  object.status = status;
  const providers = typeof deps.providers === "function" ? deps.providers(ctx) : deps.providers;
  const pass = {
    ctx,
    object,
    proxy: parsed.data,
    status,
    providers,
    timings: deps.timings,
    allowList: deps.allowList,
    probeAllowList: deps.probeAllowList ?? emptyProbeAllowList,
  };
  try {
    if (object.metadata.deletionTimestamp) return await reconcileDelete(pass);
    if (parsed.data.spec.mode === ProxyMode.External) return await reconcileExternal(pass);
    return await reconcileManaged(pass);
  } finally {
    applyProbeTimeout(status, parsed.data.spec.healthCheck, stampAt(ctx.clock.now(), object));
    status.phase = computePhase(status, {
      deleting: object.metadata.deletionTimestamp !== undefined,
      generation: object.metadata.generation,
      healthChecked: parsed.data.spec.healthCheck !== undefined,
    });
  }
}
