/**
 * External mode (seed §4): someone else runs the proxy. The address comes from the spec; no
 * instance is kept and no finalizer is held (`proxyFinalizing` wants it released).
 */
import { assertNever } from "../../guards/index.ts";
import { checkProbeTarget, healthStateOf, projectHealth } from "../../health/index.ts";
import { ReconcileError } from "../../kube/index.ts";
import { done, failed, type Outcome, type OutcomeMetadata, requeueAfter } from "../../runtime/index.ts";
import { ProxyConditionType, ProxyReason, proxySpecHashAnnotation } from "./api.ts";
import { deleteInstances, providerNamed } from "./delete.ts";
import { healthInstanceOf } from "./health-subject.ts";
import type { ProxyPass } from "./pass.ts";
import { applyHealth, dropCondition, setProvisioned, stampAt } from "./status.ts";

/**
 * Sets `status.ip` to `spec.endpoint.host`, Provisioned=True/ExternalEndpoint, and projects health.
 *
 * A Proxy switched from Managed to External lets go of what Managed mode held first (seed:
 * External never has a finalizer or a provider): its instance is deleted through the provider
 * that made it and polled every `deletionPoll` seconds until gone, then the providerID and the
 * spec-hash annotation are dropped — and the finalizer, which the runtime releases through
 * {@link releaseExternal}. Meanwhile the endpoint is already used and Provisioned's message names
 * the instance being deleted.
 *
 * An endpoint on loopback, a private range, a link-local or metadata address (a tenant asking
 * kubefn to probe its internal network; see shared/health/target.ts) that `PROBE_ALLOWED_CIDRS`
 * does not admit is refused before anything is probed: a PermanentError with reason
 * EndpointNotAllowed (phase Failed, a Warning Event), latched until the spec changes, like the
 * instance allow-list's refusals. A name is checked as written here; the Node prober checks what
 * it resolves to before connecting.
 *
 * Caveats: a latched refusal stays when the operator widens the allow-list, until the spec is
 * edited. The provider is the one the scheme of `status.providerID` names (`kubernetes://…`,
 * `gce://…`), else `spec.provider`. When neither names a provider this platform has, nothing can be
 * reached: the finalizer goes at once, and an instance left behind is the orphan sweep's, which
 * does not count External Proxies as owners.
 */
export async function reconcileExternal(pass: ProxyPass): Promise<Outcome> {
  return externalStatus(pass, await releaseManaged(pass, false));
}

/**
 * The cleanup of the finalizer a Proxy switched to External still holds: what Managed mode made
 * is deleted, also when no providerID or spec hash names it (an instance carrying the owner tag);
 * `done()` once nothing is left, dropping the spec hash with the finalizer. Meanwhile the status
 * is External's.
 */
export async function releaseExternal(pass: ProxyPass): Promise<Outcome> {
  const release = await releaseManaged(pass, true);
  return release.kind === "clean" ? done().withMetadata(dropSpecHash) : externalStatus(pass, release);
}

/** What Managed mode left no longer names an instance: the spec hash goes (with the outcome). */
const dropSpecHash: OutcomeMetadata = { annotations: { [proxySpecHashAnnotation]: null } };

function externalStatus(pass: ProxyPass, release: Release): Outcome {
  const { ctx, proxy, status } = pass;
  const at = stampAt(ctx.clock.now(), pass.object);
  const endpoint = proxy.spec.endpoint;
  dropCondition(status, ProxyConditionType.PermanentError);
  dropCondition(status, ProxyConditionType.QuotaExceeded);
  if (release.kind === "outcome") return release.outcome;
  const next = (outcome: Outcome) =>
    release.kind === "clean" ? outcome.withMetadata(dropSpecHash) : outcome;
  if (!endpoint) {
    // The schema requires an endpoint in External mode; an object that escaped it waits for a fix.
    setProvisioned(status, false, ProxyReason.ExternalEndpoint, "spec.endpoint is not set", at);
    return next(release.kind === "deleting" ? requeueAfter(pass.timings.deletionPoll) : done());
  }
  const verdict = checkProbeTarget(endpoint.host, { allow: pass.probeAllowList });
  if (!verdict.allowed) {
    delete status.ip;
    const message = `spec.endpoint.host: ${verdict.message}`;
    return next(failed(ReconcileError.permanent(ProxyReason.EndpointNotAllowed, message)));
  }
  status.ip = endpoint.host;
  const releasing =
    release.kind === "deleting" ? `; deleting the Managed instance ${release.ids.join(", ")}` : "";
  setProvisioned(
    status,
    true,
    ProxyReason.ExternalEndpoint,
    `external endpoint ${endpoint.scheme}://${endpoint.host}:${endpoint.port}${releasing}`,
    at,
  );
  const projection = projectHealth(healthStateOf(status), healthInstanceOf(proxy));
  applyHealth(status, projection, proxy.spec.healthCheck !== undefined, at);
  return next(release.kind === "deleting" ? requeueAfter(pass.timings.deletionPoll) : done());
}

type Release =
  | { kind: "clean" }
  | { kind: "deleting"; ids: string[] }
  | { kind: "outcome"; outcome: Outcome };

/**
 * Deletes what Managed mode left behind, then drops the providerID. `held`: the finalizer is still
 * held, so an instance is looked for by its owner tag even when nothing else names one.
 */
async function releaseManaged(pass: ProxyPass, held: boolean): Promise<Release> {
  const { object, proxy, status } = pass;
  const hashed = object.metadata.annotations?.[proxySpecHashAnnotation] !== undefined;
  if (!held && !hashed && !status.providerID) return { kind: "clean" };
  // The instance's own providerID names the provider that made it (spec.provider may have been
  // edited in the same change); without one, spec.provider is the one to ask by owner tag.
  const provider =
    providerNamed(pass.providers, schemeOf(status.providerID)) ??
    providerNamed(pass.providers, proxy.spec.provider);
  const step = await deleteInstances(pass, provider, {
    providerKnown: provider !== undefined,
    providerID: status.providerID,
  });
  switch (step.kind) {
    case "outcome":
    case "deleting":
      return step;
    case "gone":
      delete status.providerID;
      return { kind: "clean" };
    default:
      return assertNever(step);
  }
}

/** "gce" for "gce://project/zone/name"; undefined for anything without a scheme. */
function schemeOf(providerID: string | undefined): string | undefined {
  const match = providerID?.match(/^([a-z][a-z0-9-]*):\/\//);
  return match?.[1];
}
