/**
 * External mode (seed §4): someone else runs the proxy. The address comes from the spec; no
 * provider is ever called and no finalizer is added.
 */
import { healthStateOf, projectHealth } from "../../health/index.ts";
import { done, type Outcome } from "../../runtime/index.ts";
import { ProxyConditionType, ProxyReason } from "./api.ts";
import { healthInstanceOf } from "./health-subject.ts";
import type { ProxyPass } from "./pass.ts";
import { applyHealth, dropCondition, setProvisioned } from "./status.ts";

/**
 * Sets `status.ip` to `spec.endpoint.host`, Provisioned=True/ExternalEndpoint, and projects health.
 *
 * Caveats: a Proxy switched from Managed to External keeps its finalizer (and its instance) until
 * it is deleted: deletion still runs the provider clean-up first.
 */
export async function reconcileExternal(pass: ProxyPass): Promise<Outcome> {
  const { ctx, object, proxy, status } = pass;
  const now = ctx.clock.now();
  const endpoint = proxy.spec.endpoint;
  dropCondition(status, ProxyConditionType.PermanentError);
  dropCondition(status, ProxyConditionType.QuotaExceeded);
  if (!endpoint) {
    // The schema requires an endpoint in External mode; an object that escaped it waits for a fix.
    setProvisioned(status, false, ProxyReason.ExternalEndpoint, "spec.endpoint is not set", now);
    return done();
  }
  status.ip = endpoint.host;
  setProvisioned(
    status,
    true,
    ProxyReason.ExternalEndpoint,
    `external endpoint ${endpoint.scheme}://${endpoint.host}:${endpoint.port}`,
    now,
  );
  const projection = projectHealth(healthStateOf(object.metadata.annotations), healthInstanceOf(proxy));
  applyHealth(status, projection, proxy.spec.healthCheck !== undefined, now);
  return done();
}
