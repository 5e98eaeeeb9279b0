/**
 * The intake canary: how `kubefn doctor` asks "does intake receive events?" at no steady cost.
 *
 * Doctor creates a ConfigMap `kubefn-intake-canary-<nonce>` in kubefn-system. Whatever delivers
 * events to kubefn (the relay's ConfigMap watch, the API server's audit webhook, a provider's
 * audit log export) carries that create to intake, which answers with an Event about the
 * ConfigMap: reason {@link INTAKE_RECEIVED_REASON}, reporting controller
 * {@link INTAKE_CANARY_CONTROLLER}, naming the source in its note. Doctor waits a bounded time for
 * that Event and then deletes the ConfigMap. Nothing runs unless doctor runs: no object pays.
 *
 * Caveats: only a create counts (the canary's delete, or an edit, maps to nothing), and the
 * canary maps to no reconcile request. The Event is written by intake itself, so it works on
 * every platform whose intake reaches the API server (all three: the Kube port).
 */

/** Where canaries live: kubefn's own namespace. */
export const INTAKE_CANARY_NAMESPACE = "kubefn-system";
/** A canary's name is this prefix and a nonce. */
export const INTAKE_CANARY_PREFIX = "kubefn-intake-canary-";
/** The Event reason intake acknowledges a canary with. */
export const INTAKE_RECEIVED_REASON = "IntakeReceived";
/** The Events' `reportingController`. */
export const INTAKE_CANARY_CONTROLLER = "kubefn.dev/intake";

/** Whether a change to (group, resource, namespace/name) is an intake canary's. */
export function isIntakeCanary(
  group: string,
  resource: string,
  namespace: string | undefined,
  name: string | undefined,
): name is string {
  return (
    group === "" &&
    resource === "configmaps" &&
    namespace === INTAKE_CANARY_NAMESPACE &&
    typeof name === "string" &&
    name.startsWith(INTAKE_CANARY_PREFIX) &&
    name.length > INTAKE_CANARY_PREFIX.length
  );
}
