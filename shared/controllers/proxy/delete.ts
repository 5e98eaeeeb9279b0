/**
 * Deletion (seed §4), the cleanup of the Proxy's finalizer: the runtime keeps the finalizer until
 * this says the instance is gone.
 */

import { assertNever } from "../../guards/index.ts";
import { isNotFound, type Kube, Resources } from "../../kube/index.ts";
import { done, failed, type Outcome, requeueAfter } from "../../runtime/index.ts";
import { ProxyReason } from "./api.ts";
import type { InstanceLookup } from "./managed.ts";
import type { ProxyPass } from "./pass.ts";
import {
  type Instance,
  isNamespaceNotOptedIn,
  isProviderNotFound,
  ownerTagKey,
  type Provider,
  type ProvidersByName,
} from "./providers/index.ts";
import { setProvisioned, stampAt } from "./status.ts";
import { stillCurrent } from "./still-current.ts";

/** What a deletion pass knows so far. */
export interface DeletionObservation {
  providerKnown: boolean;
  providerID?: string | undefined;
  /** provider.get(providerID); undefined until looked up. */
  lookup?: InstanceLookup | undefined;
  /** provider.listByTag(owner tag) when there is no providerID; undefined until listed. */
  tagged?: Instance[] | undefined;
}

export type DeletionAction =
  /** Nothing of this Proxy's is left: the finalizer may go. */
  | { kind: "gone" }
  | { kind: "lookup"; id: string }
  | { kind: "listTagged" }
  /** Delete these (already Terminating ones are only polled) and poll until they are gone. */
  | { kind: "deleteInstances"; instances: Instance[] };

/**
 * Decides the next step of a deletion pass. Pure.
 *
 * Without a providerID, or when it names nothing of this Proxy's, the pass still asks the provider
 * for instances carrying this Proxy's owner tag: a pass that created an instance may have died
 * before its status write recorded the ID, and `status.providerID` is tenant-writable (a forged ID
 * is looked up as "not this Proxy's", and must neither be deleted nor hide the real instance).
 *
 * Caveats: with an unknown provider nothing can be reached (or was ever created), so the finalizer
 * goes at once.
 */
export function decideDeletion(o: DeletionObservation): DeletionAction {
  if (!o.providerKnown) return { kind: "gone" };
  if (o.providerID && !o.lookup) return { kind: "lookup", id: o.providerID };
  if (o.lookup?.found) return { kind: "deleteInstances", instances: [o.lookup.instance] };
  if (!o.tagged) return { kind: "listTagged" };
  if (o.tagged.length === 0) return { kind: "gone" };
  return { kind: "deleteInstances", instances: o.tagged };
}

/**
 * One deletion pass: look the instance up, delete it and poll every `deletionPoll` seconds until
 * the provider reports it gone, then `done()`: the runtime removes the finalizer.
 */
export async function reconcileDelete(pass: ProxyPass): Promise<Outcome> {
  const { ctx, object, proxy, status } = pass;
  const provider = providerNamed(pass.providers, proxy.spec.provider);
  const step = await deleteInstances(pass, provider, {
    providerKnown: provider !== undefined,
    providerID: status.providerID,
  });
  if (step.kind === "outcome") return step.outcome;
  if (step.kind === "deleting") {
    const message = `deleting instance ${step.ids.join(", ")}`;
    setProvisioned(status, false, ProxyReason.Deleting, message, stampAt(ctx.clock.now(), object));
    return requeueAfter(pass.timings.deletionPoll);
  }
  return done();
}

/** The provider registered under `name`; undefined for an unset or unknown name. */
export function providerNamed(providers: ProvidersByName, name: string | undefined): Provider | undefined {
  return name !== undefined && Object.hasOwn(providers, name) ? providers[name] : undefined;
}

/** Where {@link deleteInstances} stopped: every instance gone, or still waiting. */
export type InstanceDeletionStep =
  | { kind: "gone" }
  /** Deletion started (or was already under way) for these providerIDs: poll again. */
  | { kind: "deleting"; ids: string[] }
  /** A provider call failed: `failed(err)`, for the error policy (failure.ts). */
  | { kind: "outcome"; outcome: Outcome };

/**
 * Drives {@link decideDeletion} through the provider: looks the instance up (or lists it by the
 * owner tag) and starts deleting what is still there (`deleting`: poll again after
 * `deletionPoll`). Returns `gone` once the provider reports nothing left, so the finalizer may go. A provider failure ends the step as `failed(err)`; the error policy writes what it means.
 */
export async function deleteInstances(
  pass: ProxyPass,
  provider: Provider | undefined,
  observation: DeletionObservation,
): Promise<InstanceDeletionStep> {
  const { ctx, object, timings } = pass;
  const onProviderError = (err: unknown): InstanceDeletionStep => ({ kind: "outcome", outcome: failed(err) });

  for (;;) {
    const action = decideDeletion(observation);
    switch (action.kind) {
      case "gone":
        return { kind: "gone" };
      case "lookup":
        try {
          observation.lookup = {
            found: true,
            instance: await provider!.get(action.id, object.metadata.uid ?? ""),
          };
        } catch (err) {
          // Refused because the namespace is going: its RoleBinding (kubefn-tenant) goes first,
          // and its Pods and Secrets with it, so there is nothing left for kubefn to delete.
          const goneWithNamespace =
            isNamespaceNotOptedIn(err) &&
            (await namespaceTerminating(ctx.kube, object.metadata.namespace ?? ""));
          if (!isProviderNotFound(err) && !goneWithNamespace) return onProviderError(err);
          observation.lookup = { found: false };
        }
        continue;
      case "listTagged":
        try {
          observation.tagged = await provider!.listByTag(
            { key: ownerTagKey, value: object.metadata.uid ?? "" },
            { namespace: object.metadata.namespace ?? "" },
          );
        } catch (err) {
          // No instance recorded and none kubefn may see: a namespace that never opted in has
          // none of kubefn's (one that opted out keeps what kubefn made there, as its admin chose).
          if (!isNamespaceNotOptedIn(err)) return onProviderError(err);
          observation.tagged = [];
        }
        continue;
      case "deleteInstances": {
        const live = action.instances.filter((i) => i.state !== "Terminating");
        if (live.length > 0 && !(await stillCurrent(ctx.kube, object))) {
          return { kind: "outcome", outcome: requeueAfter(timings.requeueNow) };
        }
        for (const instance of live) {
          try {
            await provider!.delete(instance.id, { owner: object.metadata.uid ?? "", uid: instance.uid });
          } catch (err) {
            if (
              isNamespaceNotOptedIn(err) &&
              (await namespaceTerminating(ctx.kube, object.metadata.namespace ?? ""))
            )
              return { kind: "gone" };
            return onProviderError(err);
          }
          await ctx.events?.record(object, {
            type: "Normal",
            reason: "InstanceDeleted",
            action: "DeleteInstance",
            note: `deleted instance ${instance.id}: the Proxy is being deleted`,
          });
        }
        return { kind: "deleting", ids: action.instances.map((i) => i.id) };
      }
      default:
        return assertNever(action);
    }
  }
}

/** Whether `namespace` is being deleted (or already gone): what is in it goes with it. */
async function namespaceTerminating(kube: Kube, namespace: string): Promise<boolean> {
  if (!namespace) return false;
  try {
    return (
      (await kube.get(Resources.Namespace, { name: namespace })).metadata.deletionTimestamp !== undefined
    );
  } catch (err) {
    return isNotFound(err);
  }
}
