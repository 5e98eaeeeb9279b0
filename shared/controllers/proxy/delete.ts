/**
 * Deletion (seed §4): keep the finalizer until the provider says the instance is gone.
 */
import { hasFinalizer, removeFinalizer } from "../../kube/finalizers.ts";
import { done, type Outcome, requeueAfter } from "../../runtime/outcome.ts";
import { ProxyReason, proxyFinalizer } from "./api.ts";
import { providerFailure } from "./failure.ts";
import type { InstanceLookup } from "./managed.ts";
import { patchMetadata } from "./metadata.ts";
import type { ProxyPass } from "./pass.ts";
import { type Instance, isProviderNotFound, ownerTagKey } from "./providers/provider.ts";
import { setProvisioned } from "./status.ts";

/** What a deletion pass knows so far. */
export interface DeletionObservation {
  hasFinalizer: boolean;
  providerKnown: boolean;
  providerID?: string | undefined;
  /** provider.get(providerID); undefined until looked up. */
  lookup?: InstanceLookup | undefined;
  /** provider.listByTag(owner tag) when there is no providerID; undefined until listed. */
  tagged?: Instance[] | undefined;
}

export type DeletionAction =
  | { kind: "done" }
  | { kind: "removeFinalizer" }
  | { kind: "lookup"; id: string }
  | { kind: "listTagged" }
  /** Delete these (already Terminating ones are only polled) and poll until they are gone. */
  | { kind: "deleteInstances"; instances: Instance[] };

/**
 * Decides the next step of a deletion pass. Pure.
 *
 * Without a providerID the pass still asks the provider for instances carrying this Proxy's owner
 * tag: a pass that created an instance may have died before its status write recorded the ID, and
 * the deterministic name would otherwise leave that instance orphaned.
 *
 * Caveats: with an unknown provider nothing can be reached (or was ever created), so the finalizer
 * goes at once.
 */
export function decideDeletion(o: DeletionObservation): DeletionAction {
  if (!o.hasFinalizer) return { kind: "done" };
  if (!o.providerKnown) return { kind: "removeFinalizer" };
  if (o.providerID) {
    if (!o.lookup) return { kind: "lookup", id: o.providerID };
    if (!o.lookup.found) return { kind: "removeFinalizer" };
    return { kind: "deleteInstances", instances: [o.lookup.instance] };
  }
  if (!o.tagged) return { kind: "listTagged" };
  if (o.tagged.length === 0) return { kind: "removeFinalizer" };
  return { kind: "deleteInstances", instances: o.tagged };
}

/**
 * One deletion pass: look the instance up, delete it and poll every `deletionPoll` seconds until
 * the provider reports it gone, then remove the finalizer (a guarded patch) and finish.
 */
export async function reconcileDelete(pass: ProxyPass): Promise<Outcome> {
  const { ctx, object, proxy, status, timings } = pass;
  const now = ctx.clock.now();
  const providerName = proxy.spec.provider ?? "";
  const provider = Object.hasOwn(pass.providers, providerName) ? pass.providers[providerName] : undefined;
  const observation: DeletionObservation = {
    hasFinalizer: hasFinalizer(object.metadata.finalizers, proxyFinalizer),
    providerKnown: provider !== undefined,
    providerID: status.providerID,
  };
  const onProviderError = (err: unknown) =>
    providerFailure(status, err, {
      generation: object.metadata.generation,
      now,
      quotaRetrySeconds: timings.quotaRetry,
    });

  for (;;) {
    const action = decideDeletion(observation);
    switch (action.kind) {
      case "done":
        return done();
      case "removeFinalizer": {
        const { finalizers } = removeFinalizer(object.metadata.finalizers, proxyFinalizer);
        await patchMetadata(ctx.kube, object, { finalizers });
        return done();
      }
      case "lookup":
        try {
          observation.lookup = { found: true, instance: await provider!.get(action.id) };
        } catch (err) {
          if (!isProviderNotFound(err)) return onProviderError(err);
          observation.lookup = { found: false };
        }
        continue;
      case "listTagged":
        try {
          observation.tagged = await provider!.listByTag({
            key: ownerTagKey,
            value: object.metadata.uid ?? "",
          });
        } catch (err) {
          return onProviderError(err);
        }
        continue;
      case "deleteInstances": {
        for (const instance of action.instances) {
          if (instance.state === "Terminating") continue;
          try {
            await provider!.delete(instance.id);
          } catch (err) {
            return onProviderError(err);
          }
          await ctx.events?.record(object, {
            type: "Normal",
            reason: "InstanceDeleted",
            action: "DeleteInstance",
            note: `deleted instance ${instance.id}: the Proxy is being deleted`,
          });
        }
        const ids = action.instances.map((i) => i.id).join(", ");
        setProvisioned(status, false, ProxyReason.Deleting, `deleting instance ${ids}`, now);
        return requeueAfter(timings.deletionPoll);
      }
      default:
        return assertNever(action);
    }
  }
}

function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`);
}
