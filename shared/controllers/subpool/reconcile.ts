/**
 * One pass over one live SubPool (the runtime added the finalizer; deletion is its cleanup,
 * deletion.ts): the active path in the seed's fixed order (config → Gateway config → spec and envelope → desired objects → Namespace →
 * credential Secret → legacy LimitRange → the other objects → HTTPRoute → status).
 */

import type { Condition, Kube, KubeObject, ObjectKey, Resource } from "../../kube/index.ts";
import {
  controllerRefTo,
  ensureObject,
  formatLabelSelector,
  isAlreadyExists,
  isControlledBy,
  isNotFound,
  listAll,
  ReconcileError,
  Resources,
  upsertOwnerReference,
} from "../../kube/index.ts";
import type { PassContext } from "../../runtime/index.ts";
import {
  awaitSweep,
  done,
  failed,
  INVOCATION_READ_MAX_AGE_SECONDS,
  type Outcome,
  ownedStatusReason,
  requeueAfter,
} from "../../runtime/index.ts";
import * as z from "../../zod/index.ts";
import {
  ExposureMode,
  parseSubPool,
  SubPoolReason as Reason,
  type SubPool,
  type SubPoolReason,
  subPoolPoolLabel,
  SubPoolConditionType as Type,
} from "./api.ts";
import type { InvalidOperatorConfig, OperatorConfig } from "./config.ts";
import {
  desiredFor,
  endpointSliceResource,
  gatewayResource,
  httpRouteResource,
  type ManagedObject,
  poolLabels,
  subPoolObjectNames,
} from "./desired.ts";
import { grantedKube, grantSubPoolObjects } from "./grant.ts";
import { describeController, namespaceConflictMessage, namespaceOwnership } from "./ownership.ts";
import {
  type ReadinessObservation,
  readinessConditions,
  type SubPoolStatusWriter,
  statusWriter,
} from "./status.ts";
import { type SubPoolTimings, waitingLook, waitingLookReason } from "./timings.ts";
import { runningRequests, type Validation, validateSubPool } from "./validate.ts";

export interface SubPoolPassDeps {
  timings: SubPoolTimings;
  /** The operator configuration, fixed for the process (validated when the adapter parsed it). */
  operatorConfig: OperatorConfig | InvalidOperatorConfig;
  /** Field manager of every write to owned objects. */
  fieldManager: string;
  /** Cryptographically random bytes for new credentials. */
  randomBytes: (length: number) => Uint8Array;
  /** The proxy gateway's last readiness, for the passes of later invocations ({@link HeldReadiness}). */
  heldGateway: HeldReadiness;
}

/**
 * The proxy gateway's readiness as an invocation last listed it, by cluster and Service: the
 * passes of the controller's later invocations (the Node host's next queue sends, a warm
 * isolate's next batch) take it while it is at most {@link INVOCATION_READ_MAX_AGE_SECONDS} old,
 * the age at which one invocation's passes already share it, instead of listing again. It holds
 * answers, never promises: workerd cancels a request that waits for a promise another request
 * settles.
 */
export type HeldReadiness = Map<string, { at: number; answer: { ready: boolean; message: string } }>;

/**
 * Reconciles one SubPool. The executor writes the status once, only if it changed.
 *
 * Caveats: a validation failure (Gateway configuration, spec, envelope) is a permanent error with
 * the reason on Ready: no retry and nothing created. A later pass (the sweep, a spec edit)
 * validates again and writes nothing while the outcome is the same.
 */
export async function reconcileSubPool(
  ctx: PassContext,
  object: KubeObject,
  deps: SubPoolPassDeps,
): Promise<Outcome> {
  const status = statusWriter(object, ctx.clock.now());

  if ("invalid" in deps.operatorConfig) {
    // Seed step 1: the operator configuration is read and validated before anything else.
    return block(
      status,
      Reason.InvalidOperatorConfig,
      `the SubPool operator's configuration is invalid (${deps.operatorConfig.invalid}); fix the SUBPOOL_* settings`,
      "permanent",
    );
  }
  const parsed = parseSubPool(object);
  if (!parsed.success) {
    return block(status, Reason.InvalidSpec, z.prettifyError(parsed.error).replace(/\n/g, "; "), "permanent");
  }
  return reconcileActive(ctx, object, parsed.data, status, deps, deps.operatorConfig);
}

async function reconcileActive(
  ctx: PassContext,
  object: KubeObject,
  pool: SubPool,
  status: SubPoolStatusWriter,
  deps: SubPoolPassDeps,
  config: OperatorConfig,
): Promise<Outcome> {
  const { timings } = deps;
  let createFirst = false;
  const ensureOpts = (m: ManagedObject) => ({
    owner: object,
    fieldManager: deps.fieldManager,
    createFirst,
    ...(m.ownedFields ? { ownedFields: m.ownedFields } : {}),
  });

  // 1–3: validate before creating anything.
  const { validation, aboveEnvelope } = await validateAgainstRunning(ctx, object, pool, config);
  if (!validation.ok) return block(status, validation.reason, validation.message, "permanent");
  // Decision 2: a running pool above a lowered envelope runs on, Ready unaffected; it says so on a
  // condition of its own (an Event once, when it turns True), not only in the log.
  if (aboveEnvelope) status.set(Type.AboveEnvelope, "True", Reason.ResourceEnvelopeExceeded, aboveEnvelope);
  else status.remove(Type.AboveEnvelope);

  // 4: everything desired, purely.
  const desired = desiredFor(pool, config, validation);
  const nsName = desired.status.namespace;

  // A pass the sweep sent because only the status differs (`status:*`) comes seconds after lists
  // that showed the Namespace ours, no legacy LimitRange and every derived object in place (those
  // are attached, and read from there): it reads none of them again, nor the Secret, which no list
  // shows — a deleted Secret is found by its event or the safety net, as by the drift lists.
  const inPlace = ctx.drift?.startsWith("status:") === true;
  // A waiting look (the follow-up of a pass that found the pool active but not Ready, spec
  // unchanged since), and a pass intake sent for status writes of the pool's StatefulSet alone
  // (`readinessFrom`), are for readiness alone: they read the StatefulSet, the route and the proxy
  // gateway — 3 or 4 requests instead of 15 — and trust the rest to their events and the drift
  // lists, like a status-only drift pass. The event's reason is only a hint of what to read: every
  // figure the pass writes it reads from the API server. A deleted owned object's event is a whole pass of its own
  // (the Node host's queue merges it with a waiting look into the event's pass).
  const look =
    (ctx.followUp === waitingLookReason || ctx.event === ownedStatusReason) &&
    reportedNamespace(object) &&
    (object.status as { observedGeneration?: number } | undefined)?.observedGeneration ===
      object.metadata.generation;
  const trusted = inPlace || look;

  // 5: the Namespace, created or confirmed ours; never adopted. A pool that has never reported
  // its Namespace most likely has none yet: try the create first, and when it is refused, look.
  // A Namespace this pass created is empty, so everything in it is created without a read first.
  const createdNamespace =
    !trusted && !reportedNamespace(object) && (await createNamespace(ctx, desired.namespace, object, deps));
  if (!createdNamespace && !trusted) {
    const namespace = await getOrUndefined(ctx, Resources.Namespace, { name: nsName });
    const ownership = namespaceOwnership(namespace, object);
    if (ownership === "foreign") {
      return block(
        status,
        Reason.NamespaceConflict,
        namespaceConflictMessage(namespace!, object),
        timings.conflictRetry,
      );
    }
    if (ownership === "absent") {
      const created = await ensureObject(ctx.kube, Resources.Namespace, desired.namespace, {
        owner: object,
        fieldManager: deps.fieldManager,
      });
      if (created.result === "conflict") {
        return block(
          status,
          Reason.NamespaceConflict,
          `Namespace ${nsName} appeared meanwhile: ${describeController(created.observed)}`,
          timings.conflictRetry,
        );
      }
    } else if (namespace?.metadata.deletionTimestamp) {
      status.ready(
        false,
        Reason.NamespaceTerminating,
        `Namespace ${nsName} is being deleted; it is recreated once gone`,
      );
      return requeueAfter(timings.deletionPoll);
    }
  }
  status.status.namespace = nsName;
  createFirst = createdNamespace;

  // 6: the credential Secret: generated only when missing, never overwritten. From here on every
  // call inside the Namespace goes through `kube`, whose rights there come from the RoleBinding of
  // kubefn-subpool-objects kubefn makes with the Namespace (it holds none of these kinds
  // cluster-wide); a call RBAC refuses (a Namespace of an earlier version, a binding deleted, or
  // one not in force yet) makes it again and retries (grant.ts).
  const labels = poolLabels(pool.metadata.name ?? "");
  if (createdNamespace) await grantSubPoolObjects(ctx.kube, nsName, labels);
  const kube = grantedKube(ctx.kube, nsName, labels, createdNamespace);
  const ensureSecret = () =>
    ensureObject(
      kube,
      Resources.Secret,
      { ...desired.credentials, data: newCredentials(deps.randomBytes) },
      { owner: object, fieldManager: deps.fieldManager, createFirst },
    );
  const ensureManaged = (managed: ManagedObject) =>
    ensureObject(kube, managed.resource, managed.object, ensureOpts(managed));
  // In a Namespace this pass created nothing else can be yet: the Secret and every derived object
  // are created at once (two round trips instead of nine in a row: the first create goes alone
  // until the new binding is in force, grant.ts), and judged below in the seed's order, so a
  // conflict still blocks the pool with the same reason.
  const created = createdNamespace
    ? await settledInOrder([ensureSecret, ...desired.managed.map((m) => () => ensureManaged(m))])
    : undefined;
  const secret = created
    ? (created[0] as Awaited<ReturnType<typeof ensureSecret>>)
    : trusted
      ? undefined
      : await ensureSecret();
  if (secret?.result === "conflict") {
    return block(
      status,
      Reason.CredentialConflict,
      `Secret ${nsName}/${desired.credentials.metadata.name} exists and is ${describeController(secret.observed)}`,
      timings.conflictRetry,
    );
  }

  // 7: a LimitRange of earlier operator versions, if this pool owns one (none in a new Namespace).
  const limitRanges =
    createdNamespace || trusted
      ? []
      : await listAll(kube, Resources.LimitRange, {
          namespace: nsName,
          labelSelector: formatLabelSelector({ [subPoolPoolLabel]: pool.metadata.name ?? "" }),
        });
  for (const legacy of limitRanges.filter((lr) => isControlledBy(lr, object))) {
    await deleteIfPresent(kube, Resources.LimitRange, legacy);
  }

  // 8: the rest, syncing only owned fields.
  let statefulSet: KubeObject | undefined;
  for (const [index, managed] of desired.managed.entries()) {
    if (look && managed.resource !== Resources.StatefulSet) continue;
    const result = created ? created[index + 1]! : await ensureManaged(managed);
    if (result.result === "conflict") {
      return block(
        status,
        Reason.ManagedResourceConflict,
        `${managed.object.kind} ${nsName}/${managed.object.metadata.name} exists and is ${describeController(result.observed)}`,
        timings.conflictRetry,
      );
    }
    if (managed.resource === Resources.StatefulSet) statefulSet = result.object;
  }

  // 9: the HTTPRoute, per mode and suspend.
  const gatewayMode = pool.spec.exposure.mode === ExposureMode.Gateway;
  let route: ReadinessObservation["route"];
  if (desired.httpRoute) {
    try {
      const result = await ensureObject(
        kube,
        httpRouteResource,
        desired.httpRoute.object,
        ensureOpts(desired.httpRoute),
      );
      if (result.result === "conflict") {
        return block(
          status,
          Reason.ManagedResourceConflict,
          `HTTPRoute ${nsName}/${desired.httpRoute.object.metadata.name} exists and is ${describeController(result.observed)}`,
          timings.conflictRetry,
        );
      }
      const gatewayKey = validation.route!.gateway;
      const gateway = await shared(ctx, `gateway:${gatewayKey.namespace}/${gatewayKey.name}`, () =>
        getOrUndefined(ctx, gatewayResource, gatewayKey),
      );
      route = routeState(result.object, gatewayKey, gateway ?? null);
    } catch (err) {
      // The Namespace exists (step 5), so a NotFound here means the kind is not served.
      if (!isNotFound(err)) throw err;
      route = {
        state: "apiMissing",
        message:
          "gateway.networking.k8s.io/v1 HTTPRoute is not served by this cluster; install the Gateway API CRDs",
      };
    }
  } else if (!createdNamespace && !trusted) {
    const existing = await getOrUndefined({ kube }, httpRouteResource, {
      namespace: nsName,
      name: subPoolObjectNames(pool.metadata.name ?? "").httpRoute,
    });
    if (existing && isControlledBy(existing, object))
      await deleteIfPresent(kube, httpRouteResource, existing);
    route = gatewayMode ? { state: "suspended" } : undefined;
  } else {
    route = gatewayMode ? { state: "suspended" } : undefined;
  }

  // 10: actual state into conditions.
  const suspended = pool.spec.suspend;
  const proxyGateway = suspended
    ? undefined
    : await proxyGatewayReadiness(ctx, config.proxyGateway, deps.heldGateway);
  const sts = (statefulSet?.status ?? {}) as { readyReplicas?: number };
  const conditions = readinessConditions({
    suspended,
    statefulSet: { wanted: suspended ? 0 : 1, ready: sts.readyReplicas ?? 0 },
    proxyGateway,
    route,
  });
  const set = (type: string, c: { status: "True" | "False" | "Unknown"; reason: string; message: string }) =>
    status.set(type, c.status, c.reason, c.message);
  set(Type.Ready, conditions.ready);
  set(Type.ProxyGatewayReady, conditions.proxyGateway);
  if (conditions.route) set(Type.RouteReady, conditions.route);
  else status.remove(Type.RouteReady);
  set(Type.Suspended, conditions.suspended);
  status.status.cpaService = desired.status.cpaService;
  if (desired.status.hostname) status.status.hostname = desired.status.hostname;
  else delete status.status.hostname;

  if (suspended) return done();
  const readySince = Date.parse(
    (status.status.conditions as Condition[] | undefined)?.find((c) => c.type === Type.Ready)
      ?.lastTransitionTime ?? "",
  );
  const waited = Number.isFinite(readySince)
    ? Math.max(0, (ctx.clock.now().getTime() - readySince) / 1000)
    : 0;
  const waiting = waitingLook(timings, conditions.ready, waited);
  if (waiting !== undefined && (timings.activeRequeue === undefined || waiting < timings.activeRequeue))
    return requeueAfter(waiting, waitingLookReason);
  return lookAgainAfter(timings.activeRequeue);
}

/**
 * Validates the pool; over the envelope, measures it again against what its own StatefulSet
 * already runs with (one GET, only on that path), so a lowered envelope refuses growth and never
 * an unchanged running pool. `aboveEnvelope` is the AboveEnvelope condition's message when the
 * pool was admitted only by what it runs.
 */
async function validateAgainstRunning(
  ctx: PassContext,
  object: KubeObject,
  pool: SubPool,
  config: OperatorConfig,
): Promise<{ validation: Validation; aboveEnvelope?: string }> {
  const first = validateSubPool(pool, config);
  if (first.ok || first.reason !== Reason.ResourceEnvelopeExceeded) return { validation: first };
  const names = subPoolObjectNames(pool.metadata.name ?? "");
  // Only a Namespace of this pool's can hold its running StatefulSet, and only there may kubefn
  // bind itself the right to read it: a pool that never ran costs one GET more, and no write.
  const namespace = await getOrUndefined(ctx, Resources.Namespace, { name: names.namespace });
  if (!namespace || !isControlledBy(namespace, object)) return { validation: first };
  const kube = grantedKube(ctx.kube, names.namespace, poolLabels(pool.metadata.name ?? ""));
  const statefulSet = await getOrUndefined({ kube }, Resources.StatefulSet, {
    namespace: names.namespace,
    name: names.statefulSet,
  });
  if (!statefulSet || !isControlledBy(statefulSet, object)) return { validation: first };
  const second = validateSubPool(pool, config, runningRequests(statefulSet));
  return second.ok
    ? { validation: second, aboveEnvelope: aboveEnvelopeMessage(first.message) }
    : { validation: second };
}

/** The AboveEnvelope message, from the envelope refusal a new pool of this spec would get. */
export function aboveEnvelopeMessage(refusal: string): string {
  return `runs above the current resource envelope, admitted under an earlier one (${refusal}); it keeps running, and growth beyond what it runs is refused`;
}

/**
 * Ready=False with `reason`, then either a permanent error (validation: no retry until the spec
 * or the operator configuration changes) or a look again after `retry` seconds (conflicts: the
 * foreign object may go away).
 */
function block(
  status: SubPoolStatusWriter,
  reason: SubPoolReason,
  message: string,
  retry: number | undefined | "permanent",
): Outcome {
  status.ready(false, reason, message);
  return retry === "permanent" ? failed(ReconcileError.permanent(reason, message)) : lookAgainAfter(retry);
}

/** A timing left unset is the sweep's drift pass. */
function lookAgainAfter(seconds: number | undefined): Outcome {
  return seconds === undefined ? awaitSweep() : requeueAfter(seconds);
}

type Conditioned = { conditions?: { type: string; status: string; reason?: string; message?: string }[] };

/**
 * What RouteReady shows in Gateway mode (pure): the HTTPRoute's own status for our parent
 * (`status.parents[]` entry whose parentRef names the Gateway; its namespace defaults to the
 * route's), then the Gateway's status — a route accepted by a Gateway that does not exist, or is
 * not Programmed (Accepted, for implementations that set no Programmed), carries no traffic.
 * `gateway` is `null` when the Gateway does not exist.
 */
export function routeState(
  route: KubeObject,
  gateway: { name: string; namespace: string },
  gatewayObject: KubeObject | null,
): NonNullable<ReadinessObservation["route"]> {
  const where = `Gateway ${gateway.namespace}/${gateway.name}`;
  const parents =
    (route.status as { parents?: (Conditioned & { parentRef?: { name?: string; namespace?: string } })[] })
      ?.parents ?? [];
  const ours = parents.find(
    (p) =>
      p.parentRef?.name === gateway.name &&
      (p.parentRef.namespace ?? route.metadata.namespace) === gateway.namespace,
  );
  const accepted = ours?.conditions?.find((c) => c.type === "Accepted");
  if (accepted?.status !== "True") {
    return {
      state: "pending",
      message: accepted?.message ? `${where}: ${accepted.message}` : `not yet accepted by ${where}`,
    };
  }
  if (gatewayObject === null) return { state: "pending", message: `${where} does not exist` };
  const gatewayConditions = (gatewayObject.status as Conditioned | undefined)?.conditions ?? [];
  const live =
    gatewayConditions.find((c) => c.type === "Programmed") ??
    gatewayConditions.find((c) => c.type === "Accepted");
  if (live?.status !== "True") {
    const detail = live
      ? `${live.type}=${live.status}${live.message ? `: ${live.message}` : ""}`
      : "no status yet";
    return { state: "pending", message: `accepted by ${where}, which is not ready (${detail})` };
  }
  return { state: "accepted", message: `accepted by ${where}` };
}

/**
 * Runs every write at once and answers their results in order; when any failed, throws the
 * first failure in order, after every write has settled (none is left running past the pass).
 */
async function settledInOrder<T>(writes: readonly (() => Promise<T>)[]): Promise<T[]> {
  const settled = await Promise.allSettled(writes.map((write) => write()));
  const failure = settled.find((r) => r.status === "rejected");
  if (failure) throw failure.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/**
 * The shared proxy gateway's readiness: its EndpointSlices, listed once per invocation (a queue
 * batch's passes share the list, as the sweep's decisions share the sweep's). A pass an event of
 * the pool's own brought (its creation, its StatefulSet's status write: `ctx.event`) or its own
 * waiting look (`ctx.followUp`) takes what an earlier invocation listed up to 30 s ago (`held`):
 * a change of the gateway reaches the pools through the sweep, whose drift and shared look
 * (shared-look.ts) read it every 30 s and send a pass to each pool it contradicts — and those
 * passes, there for the gateway, list it in their own invocation, as does every pass outside
 * one (no `ctx.memo`).
 */
function proxyGatewayReadiness(
  ctx: PassContext,
  gateway: { namespace: string; service: string },
  held: HeldReadiness,
): Promise<{ ready: boolean; message: string }> {
  const service = `${gateway.namespace}/${gateway.service}`;
  const key = `${ctx.cluster ?? ""}:${service}`;
  const last = held.get(key);
  const maxAgeMs = INVOCATION_READ_MAX_AGE_SECONDS * 1000;
  const takesHeld = ctx.event !== undefined || ctx.followUp !== undefined;
  if (ctx.memo && takesHeld && last && ctx.clock.now().getTime() - last.at <= maxAgeMs)
    return Promise.resolve(last.answer);
  return shared(ctx, `proxy-gateway:${service}`, async () => {
    const at = ctx.clock.now().getTime();
    const answer = gatewayReadiness(
      await listAll(ctx.kube, endpointSliceResource, {
        namespace: gateway.namespace,
        labelSelector: formatLabelSelector({ "kubernetes.io/service-name": gateway.service }),
      }),
      gateway,
    );
    // A list that started earlier than the one held (two invocations at once) does not replace it.
    if (ctx.memo && at >= (held.get(key)?.at ?? -Infinity)) held.set(key, { at, answer });
    return answer;
  });
}

/**
 * A read of state no pool owns (no event of it reaches the pool), shared by the passes of one
 * invocation through `ctx.memo` (at most 30 s old); read afresh outside one.
 */
function shared<T>(ctx: PassContext, key: string, read: () => Promise<T>): Promise<T> {
  return ctx.memo ? ctx.memo.once(`subpool:${key}`, read) : read();
}

/** Whether the shared proxy gateway's EndpointSlices hold a ready endpoint (pure). */
export function gatewayReadiness(
  slices: readonly KubeObject[],
  gateway: { namespace: string; service: string },
): { ready: boolean; message: string } {
  const ready = (slices as (KubeObject & { endpoints?: { conditions?: { ready?: boolean } }[] })[])
    .flatMap((s) => s.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false).length;
  const where = `Service ${gateway.namespace}/${gateway.service}`;
  return ready > 0
    ? { ready: true, message: `${where} has ${ready} ready endpoint${ready === 1 ? "" : "s"}` }
    : { ready: false, message: `${where} has no ready endpoints` };
}

/** Whether an earlier pass reported the pool's Namespace in its status (it got that far). */
function reportedNamespace(object: KubeObject): boolean {
  return typeof (object.status as { namespace?: unknown } | undefined)?.namespace === "string";
}

/**
 * Creates the pool's Namespace with a controller reference to the pool; false when one of that
 * name exists already (whoever controls it: the caller looks).
 */
async function createNamespace(
  ctx: PassContext,
  namespace: KubeObject,
  pool: KubeObject,
  deps: SubPoolPassDeps,
): Promise<boolean> {
  const refs = upsertOwnerReference(namespace.metadata.ownerReferences, controllerRefTo(pool)).refs;
  try {
    await ctx.kube.create(
      Resources.Namespace,
      { ...namespace, metadata: { ...namespace.metadata, ownerReferences: refs } },
      { fieldManager: deps.fieldManager },
    );
    return true;
  } catch (err) {
    if (isAlreadyExists(err)) return false;
    throw err;
  }
}

/** The object at `key`, or undefined when there is none. */
export async function getOrUndefined(
  ctx: Pick<PassContext, "kube">,
  res: Resource,
  key: ObjectKey,
): Promise<KubeObject | undefined> {
  try {
    return await ctx.kube.get(res, key);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** Deletes `observed`, guarded by its UID (never a same-named successor); absent is fine. */
async function deleteIfPresent(kube: Kube, res: Resource, observed: KubeObject): Promise<void> {
  const { name = "", namespace, uid } = observed.metadata;
  try {
    await kube.delete(
      res,
      { name, ...(namespace ? { namespace } : {}) },
      uid ? { preconditions: { uid } } : {},
    );
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

/** A username and a 32-byte password, base64 as Secret `data` wants. */
export function newCredentials(randomBytes: (length: number) => Uint8Array): Record<string, string> {
  const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return { username: btoa(`cpa-${hex(randomBytes(6))}`), password: btoa(hex(randomBytes(32))) };
}
