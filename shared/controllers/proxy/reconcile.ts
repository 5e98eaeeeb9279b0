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
import { reconcileExternal, releaseExternal } from "./external.ts";
import { reconcileManaged } from "./managed.ts";
import type { ProxyPass } from "./pass.ts";
import type { ProvidersByName } from "./providers/index.ts";
import { applyProbeTimeout, computePhase, stampAt } from "./status.ts";
import type { ProxyTimings } from "./timings.ts";

/** Providers fixed at start-up, or built per pass from its context (e.g. the pod provider on `ctx.kube`). */
export type ProvidersSource = ProvidersByName | ((ctx: PassContext) => ProvidersByName);

/** What a pass over a Proxy works with, besides its context and object. */
export interface ProxyPassDeps {
  providers: ProvidersSource;
  timings: ProxyTimings;
  allowList: InstanceAllowList;
  probeAllowList?: ProbeAllowList;
}

/**
 * One pass over one live Proxy (seed §2): dispatch on mode; whatever the branch did, recompute
 * `status.phase`. The executor writes the status once, only if it changed; the runtime keeps the
 * finalizer (`proxyFinalizing` in api.ts) and calls {@link cleanupProxy} on deletion.
 *
 * Caveats: an object that fails the schema (it escaped or predates the CRD) is a permanent error
 * reason InvalidSpec; nothing is written and the next spec edit retries.
 */
export function reconcileProxy(ctx: PassContext, object: KubeObject, deps: ProxyPassDeps): Promise<Outcome> {
  return withProxyPass(ctx, object, deps, (pass) =>
    pass.proxy.spec.mode === ProxyMode.External ? reconcileExternal(pass) : reconcileManaged(pass),
  );
}

/**
 * The cleanup of a Proxy's finalizer: on deletion its instance is deleted and polled until gone
 * (delete.ts, seed §4); on a Proxy switched to External, what Managed mode made goes the same way
 * while the endpoint is already used (external.ts). `done()` lets the runtime remove the finalizer.
 */
export function cleanupProxy(ctx: PassContext, object: KubeObject, deps: ProxyPassDeps): Promise<Outcome> {
  return withProxyPass(ctx, object, deps, (pass) =>
    object.metadata.deletionTimestamp ? reconcileDelete(pass) : releaseExternal(pass),
  );
}

/** Parses the Proxy, runs `branch` on it, then recomputes the probe cap and `status.phase`. */
async function withProxyPass(
  ctx: PassContext,
  object: KubeObject,
  deps: ProxyPassDeps,
  branch: (pass: ProxyPass) => Promise<Outcome>,
): Promise<Outcome> {
  const parsed = parseProxy(object);
  if (!parsed.success) {
    return failed(ReconcileError.permanent("InvalidSpec", z.prettifyError(parsed.error)));
  }
  const status: ProxyStatus = isRecord(object.status) ? (object.status as ProxyStatus) : {};
  object.status = status;
  const providers = typeof deps.providers === "function" ? deps.providers(ctx) : deps.providers;
  const pass: ProxyPass = {
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
    return await branch(pass);
  } finally {
    applyProbeTimeout(status, parsed.data.spec.healthCheck, stampAt(ctx.clock.now(), object));
    status.phase = computePhase(status, {
      deleting: object.metadata.deletionTimestamp !== undefined,
      generation: object.metadata.generation,
      healthChecked: parsed.data.spec.healthCheck !== undefined,
    });
  }
}
