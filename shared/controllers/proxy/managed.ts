/**
 * The Managed state machine (seed §3): a pure `decideManaged` over what a pass has observed so
 * far, and `reconcileManaged`, which observes (cloud-init, provider lookup) and acts through the
 * Kube and Provider ports until a decision ends the pass.
 */

import { assertNever } from "../../guards/index.ts";
import { healthStateOf, projectHealth } from "../../health/index.ts";
import { ReconcileError } from "../../kube/index.ts";
import { awaitSweep, failed, type Outcome, type OutcomeMetadata, requeueAfter } from "../../runtime/index.ts";
import { instanceRefusal } from "./allow-list.ts";
import { ProxyReason, proxySpecHashAnnotation } from "./api.ts";
import {
  isCloudInitError,
  proxySpecHash,
  type ResolvedCloudInit,
  resolveCloudInit,
  specHashPrefix,
} from "./cloud-init.ts";
import type { ProxyPass } from "./pass.ts";
import {
  type Instance,
  isNamespaceNotOptedIn,
  isProviderNotFound,
  nameFromUID,
  ownerTags,
  type Provider,
} from "./providers/index.ts";
import { applyHealth, setProvisioned, stampAt } from "./status.ts";
import { stillCurrent } from "./still-current.ts";

/** The result of looking the current instance up. */
export type InstanceLookup = { found: true; instance: Instance } | { found: false };

/** What a Managed pass knows so far. Later fields are filled in as the pass observes more. */
export interface ManagedObservation {
  providerKnown: boolean;
  /** status.providerID. */
  providerID?: string | undefined;
  /** The spec-hash annotation as stored. */
  storedHash?: string | undefined;
  /** The hash of the current spec and resolved cloud-init; undefined until resolved. */
  desiredHash?: string | undefined;
  /** provider.get(providerID); undefined until looked up. */
  lookup?: InstanceLookup | undefined;
  /** The spec's instance is not on the operator's allow-list: never create or replace for it. */
  refused?: boolean;
}

/** The next step of a Managed pass. `resolve` and `lookup` ask for an observation, not an action. */
export type ManagedAction =
  | { kind: "unknownProvider" }
  | { kind: "resolve" }
  /** The instance the spec asks for is not allowed: create nothing, delete nothing. */
  | { kind: "refuse" }
  | { kind: "create" }
  | { kind: "adopt" }
  | { kind: "lookup"; id: string; purpose: "replace" | "observe" }
  /** The instance is gone: forget it; the next pass creates. */
  | { kind: "forget"; purpose: "replace" | "observe" }
  /** The spec changed: delete the instance and poll until it is gone. */
  | { kind: "replace"; instance: Instance; callDelete: boolean }
  | { kind: "poll"; instance: Instance }
  | { kind: "running"; instance: Instance & { ip: string } }
  /** Stopped or Terminating: instances are cattle — delete and recreate. */
  | { kind: "deleteDead"; instance: Instance; callDelete: boolean };

/**
 * Decides the next step of a Managed pass (seed §3). Pure.
 *
 * Order: the provider first (the runtime added the finalizer before the pass); then cloud-init
 * (needed for the hash); then no instance → create; a missing or foreign hash → adopt (write it, no create);
 * otherwise look the instance up and act on its state, replacing it when the hash differs. A
 * create or replace for a shape the allow-list refuses is `refuse` (a running instance stays).
 */
export function decideManaged(o: ManagedObservation): ManagedAction {
  if (!o.providerKnown) return { kind: "unknownProvider" };
  if (o.desiredHash === undefined) return { kind: "resolve" };
  if (!o.providerID) return o.refused ? { kind: "refuse" } : { kind: "create" };
  const ours = o.storedHash?.startsWith(specHashPrefix) ?? false;
  if (!ours) return { kind: "adopt" };
  const purpose = o.storedHash === o.desiredHash ? "observe" : "replace";
  if (purpose === "replace" && o.refused) return { kind: "refuse" };
  if (!o.lookup) return { kind: "lookup", id: o.providerID, purpose };
  if (!o.lookup.found) return { kind: "forget", purpose };
  const instance = o.lookup.instance;
  const terminating = instance.state === "Terminating";
  if (purpose === "replace") return { kind: "replace", instance, callDelete: !terminating };
  switch (instance.state) {
    case "Provisioning":
      return { kind: "poll", instance };
    case "Running":
      return instance.ip
        ? { kind: "running", instance: { ...instance, ip: instance.ip } }
        : { kind: "poll", instance };
    case "Stopped":
    case "Terminating":
      return { kind: "deleteDead", instance, callDelete: !terminating };
    default:
      return assertNever(instance.state);
  }
}

/**
 * One Managed pass: observe as `decideManaged` asks, then act once.
 *
 * | action | writes | outcome |
 * | --- | --- | --- |
 * | unknownProvider | nothing (the error policy latches it) | failed(permanent) |
 * | refuse | nothing (latched: ImageNotAllowed, MachineTypeNotAllowed, ZoneNotAllowed) | failed(permanent) |
 * | create | provider.create (name from UID); providerID; spec-hash annotation (with the outcome) | provisioningPoll |
 * | adopt | spec-hash annotation (with the outcome) | requeueNow |
 * | forget | providerID and IP cleared | requeueNow |
 * | replace | provider.delete; Provisioned=False/Replacing | deletionPoll |
 * | poll | Provisioned=False/Provisioning | provisioningPoll |
 * | running | IP, Provisioned=True/Created, health | awaitSweep (the sweep's drift poll) |
 * | deleteDead | provider.delete; Provisioned=False/Replacing | deletionPoll |
 *
 * Provider errors are returned as `failed(err)`; the controller's error policy (failure.ts) writes
 * what they mean (QuotaExceeded, the PermanentError latch) and the executor skips latched passes.
 *
 * The spec-hash annotation travels with the outcome (`withMetadata`): the runtime writes it before
 * the status, so a pass killed between the two leaves the hash without the providerID, and the
 * next pass's create finds the instance by its deterministic name.
 */
export async function reconcileManaged(pass: ProxyPass): Promise<Outcome> {
  const { ctx, object, proxy, status, timings } = pass;
  const at = stampAt(ctx.clock.now(), pass.object);
  const providerName = proxy.spec.provider ?? "";
  const provider: Provider | undefined = Object.hasOwn(pass.providers, providerName)
    ? pass.providers[providerName]
    : undefined;
  const observation: ManagedObservation = {
    providerKnown: provider !== undefined,
    providerID: status.providerID,
    storedHash: object.metadata.annotations?.[proxySpecHashAnnotation],
  };
  const refusal = instanceRefusal(proxy.spec.instance, pass.allowList);
  observation.refused = refusal !== undefined;
  let cloudInit: ResolvedCloudInit = { userData: undefined };
  const ownerUID = object.metadata.uid ?? "";
  /**
   * A failed call: the namespace not opted in is said in Provisioned and a Warning Event (the
   * executor's backoff retries, the sweep brings the pass once the namespace reads well).
   */
  const failedCall = async (err: unknown): Promise<Outcome> => {
    if (isNamespaceNotOptedIn(err)) {
      setProvisioned(status, false, ProxyReason.NamespaceNotOptedIn, err.message, at);
      await ctx.events?.record(object, {
        type: "Warning",
        reason: ProxyReason.NamespaceNotOptedIn,
        action: "Reconcile",
        note: err.message,
      });
    }
    return failed(err);
  };

  for (;;) {
    const action = decideManaged(observation);
    switch (action.kind) {
      case "unknownProvider": {
        const known = Object.keys(pass.providers).sort().join(", ") || "none";
        const message = `no provider named "${providerName}" (known: ${known})`;
        return failed(ReconcileError.permanent(ProxyReason.UnknownProvider, message));
      }
      case "refuse":
        return failed(refusal);
      case "resolve": {
        try {
          cloudInit = await resolveCloudInit(ctx.kube, object.metadata.namespace ?? "", proxy.spec);
        } catch (err) {
          if (isNamespaceNotOptedIn(err)) return failedCall(err);
          if (!isCloudInitError(err)) throw err;
          setProvisioned(status, false, ProxyReason.CloudInitError, err.message, at);
          return failed(err);
        }
        observation.desiredHash = await proxySpecHash(proxy.spec, cloudInit);
        continue;
      }
      case "create": {
        if (!(await stillCurrent(ctx.kube, object))) return requeueAfter(timings.requeueNow);
        let instance: Instance;
        try {
          const uid = object.metadata.uid ?? "";
          instance = await provider!.create({
            name: nameFromUID(uid),
            namespace: object.metadata.namespace ?? "",
            ...(cloudInit.userData === undefined ? {} : { cloudInit: cloudInit.userData }),
            instance: proxy.spec.instance ?? {},
            tags: ownerTags(uid),
          });
        } catch (err) {
          return failedCall(err);
        }
        await ctx.events?.record(object, {
          type: "Normal",
          reason: "InstanceCreated",
          action: "CreateInstance",
          note: `created instance ${instance.id}`,
        });
        status.providerID = instance.id;
        delete status.ip;
        setProvisioned(status, false, ProxyReason.Provisioning, `instance ${instance.id} created`, at);
        return requeueAfter(timings.provisioningPoll).withMetadata(specHashOf(observation.desiredHash!));
      }
      case "adopt":
        return requeueAfter(timings.requeueNow).withMetadata(specHashOf(observation.desiredHash!));
      case "lookup":
        try {
          observation.lookup = { found: true, instance: await provider!.get(action.id, ownerUID) };
        } catch (err) {
          if (!isProviderNotFound(err)) return failedCall(err);
          observation.lookup = { found: false };
        }
        continue;
      case "forget": {
        const gone = status.providerID;
        delete status.providerID;
        delete status.ip;
        setProvisioned(
          status,
          false,
          action.purpose === "replace" ? ProxyReason.Replacing : ProxyReason.Provisioning,
          `instance ${gone} is gone; creating a new one`,
          at,
        );
        return requeueAfter(timings.requeueNow);
      }
      case "replace":
      case "deleteDead": {
        if (action.callDelete) {
          if (!(await stillCurrent(ctx.kube, object))) return requeueAfter(timings.requeueNow);
          try {
            await provider!.delete(action.instance.id, { owner: ownerUID, uid: action.instance.uid });
          } catch (err) {
            return failedCall(err);
          }
        }
        const why =
          action.kind === "replace"
            ? "the spec or its cloud-init changed"
            : `the instance is ${action.instance.state}`;
        if (action.callDelete) {
          await ctx.events?.record(object, {
            type: action.kind === "replace" ? "Normal" : "Warning",
            reason: action.kind === "replace" ? "InstanceReplaced" : "InstanceDead",
            action: "DeleteInstance",
            note: `${why}: deleted instance ${action.instance.id}; a new one follows`,
          });
        }
        setProvisioned(
          status,
          false,
          ProxyReason.Replacing,
          `${why}: deleting instance ${action.instance.id} before recreating it`,
          at,
        );
        return requeueAfter(timings.deletionPoll);
      }
      case "poll":
        setProvisioned(
          status,
          false,
          ProxyReason.Provisioning,
          `instance ${action.instance.id} is provisioning`,
          at,
        );
        return requeueAfter(timings.provisioningPoll);
      case "running": {
        status.ip = action.instance.ip;
        setProvisioned(status, true, ProxyReason.Created, `instance ${action.instance.id} is running`, at);
        const projection = projectHealth(healthStateOf(status), action.instance.id);
        applyHealth(status, projection, proxy.spec.healthCheck !== undefined, at);
        return awaitSweep();
      }
      default:
        return assertNever(action);
    }
  }
}

/** The spec-hash annotation an Outcome carries (`withMetadata`). */
function specHashOf(hash: string): OutcomeMetadata {
  return { annotations: { [proxySpecHashAnnotation]: hash } };
}
