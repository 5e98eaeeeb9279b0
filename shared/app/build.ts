import {
  type Context,
  createSweepMemo,
  DEFAULT_CLUSTER,
  derivedSealKeySource,
  type HopKind,
  hasBodies,
  INVOCATION_READ_MAX_AGE_SECONDS,
  type Message,
  type MessageAuthenticator,
  messageAuthenticatorFrom,
  type SweepMemo,
  statusSealFrom,
  withoutBodies,
} from "../runtime/index.ts";
import { type AdmissionGate, createAdmissionGate } from "./admission/index.ts";
import { PassHistory } from "./fleet/index.ts";
import { stoppedBySettings } from "./operator-settings.ts";
import { createOperators, type Operators } from "./operators.ts";
import type { KubefnPorts } from "./ports.ts";
import type { KubefnSettings } from "./settings.ts";
import { admissionGateClosed, invocationStateChanges } from "./state-changes.ts";
import { type Hop, tracedHop } from "./trace.ts";

/**
 * The parts of one kubefn that its calls share: the core's context, the operators, the admission
 * gate, how bodies travel, and how a hop of a trace starts. Built once by {@link buildCore}.
 */
export interface Core {
  settings: KubefnSettings;
  ports: KubefnPorts;
  /** The cluster this kubefn reconciles: its messages name it, and it runs no other's. */
  cluster: string;
  /** The context every invocation starts from (the ports, the status seal). */
  ctx: Context;
  ops: Operators;
  /** kubefn's containment: no pass, job or sweep runs while its admission policies are missing. */
  admission: AdmissionGate;
  /** The queue is this process's own (the Node host's): bodies travel without a MAC. */
  inProcess: boolean;
  /** Signs and checks the bodies on a platform queue; unset there when `STATUS_SEAL_KEY` is. */
  mac: MessageAuthenticator | undefined;
  /** Whether objects may travel with a message (in process, or with a MAC to vouch for them). */
  bodiesTravel: boolean;
  /** The last passes, for the fleet page. */
  passes: PassHistory;
  /** A hop of a chain on `on`: a child of `parent` (a message's `traceparent`) or a new trace. */
  hop(on: Context, parent: string | undefined, kind: HopKind): Hop;
  /** A message as it goes on the queue: its bodies signed, or left off when they cannot be. */
  outgoing(message: Message): Promise<Message>;
  /** The context of one invocation: its own request budget and shared reads. */
  invocation(reads?: SweepMemo): Context;
}

/**
 * Binds the ports and builds the operators of `settings` (or runs `operators`, as tests do),
 * logging what does not start.
 */
export function buildCore(settings: KubefnSettings, ports: KubefnPorts, operators?: Operators): Core {
  const ctx: Context = {
    cluster: ports.cluster ?? DEFAULT_CLUSTER,
    kube: ports.kube,
    queue: ports.queue,
    clock: ports.clock ?? { now: () => new Date() },
    log: ports.log,
    metrics: ports.metrics,
    random: ports.random ?? Math.random,
  };
  // Unset only where intake is off too (no audit token, no relay secret): the sweep then sends a
  // new object (status empty) its first pass at once, and finds every other change at its drift
  // period, a forged status included.
  const seal = statusSealFrom(settings);
  if (seal) ctx.seal = seal;
  const derivedFrom = derivedSealKeySource(settings);
  if (derivedFrom) {
    ctx.log.warn(
      `the status seal's key is derived from ${derivedFrom}, which whoever writes into that intake channel also holds (with a stolen kubefn token they could seal a status of their own): set STATUS_SEAL_KEY (kubefn install, the chart and the Lambda template make one)`,
    );
  }
  // Bodies on a platform queue carry kubefn's MAC; without a key none travel there (passes read
  // what they need) and probes run in the sweep, where no queue carries their objects.
  const inProcess = ports.inProcessQueue === true;
  const mac = inProcess ? undefined : messageAuthenticatorFrom(settings);
  const bodiesTravel = inProcess || mac !== undefined;
  if (!bodiesTravel && settings.probeShardSize) {
    ctx.log.warn(
      "STATUS_SEAL_KEY is not set: probes run in the sweep instead of probe shards (a shard's objects on the queue need kubefn's MAC, keyed from STATUS_SEAL_KEY)",
      { probeShardSize: settings.probeShardSize },
    );
  }
  const cluster = ctx.cluster ?? DEFAULT_CLUSTER;
  // Every message names its cluster (one deployment may reconcile many), under its MAC.
  const outgoing = async (sent: Message): Promise<Message> => {
    const message = sent.cluster === undefined ? { ...sent, cluster } : sent;
    if (inProcess || !hasBodies(message)) return message;
    if (mac) return mac.sign(message);
    return message.kind === "job" ? message : withoutBodies(message);
  };
  const ops = operators ?? operatorsOf(settings, ports, bodiesTravel);
  logRefusals(ctx, settings, ops);
  return {
    settings,
    ports,
    cluster,
    ctx,
    ops,
    admission: createAdmissionGate({
      kube: ctx.kube,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      recheckSeconds: settings.admissionRecheckSeconds,
      onClosed: (problems) =>
        invocationStateChanges(ports.stateChanges, 1, ctx)?.publish([
          admissionGateClosed(problems, ctx.clock.now()),
        ]),
    }),
    inProcess,
    mac,
    bodiesTravel,
    passes: new PassHistory(),
    hop: (on, parent, kind) => tracedHop(on, parent, kind, ports.spans, outgoing, cluster),
    outgoing,
    invocation: (reads) => ({
      ...ctx,
      ...(ports.invocationKube ? { kube: ports.invocationKube() } : {}),
      memo: reads ?? createSweepMemo(INVOCATION_READ_MAX_AGE_SECONDS * 1000),
      stateChanges: invocationStateChanges(ports.stateChanges, settings.stateChangesPerInvocation, ctx),
    }),
  };
}

/** The operators `settings` and `ports` describe. */
function operatorsOf(settings: KubefnSettings, ports: KubefnPorts, bodiesTravel: boolean): Operators {
  return createOperators({
    ...ports.operatorOptions,
    prober: ports.prober,
    sweepPeriodSeconds: settings.sweepPeriodSeconds,
    probeConcurrency: settings.probeConcurrency,
    ...(settings.probeNamespaceConcurrency
      ? { probeNamespaceConcurrency: settings.probeNamespaceConcurrency }
      : {}),
    ...(settings.probeShardSize && bodiesTravel ? { probeShardSize: settings.probeShardSize } : {}),
    ...(ports.probeSlots ? { probeSlotScope: ports.probeSlots } : {}),
    ...(settings.minReportIntervalSeconds
      ? { minReportIntervalSeconds: settings.minReportIntervalSeconds }
      : {}),
    ...(settings.orphanGraceSeconds === undefined ? {} : { orphanGraceSeconds: settings.orphanGraceSeconds }),
    ...(settings.apiToken ? { apiToken: settings.apiToken } : {}),
    settings: settings.operators,
  });
}

/** Logs each operator that did not start; the others run. */
function logRefusals(ctx: Context, settings: KubefnSettings, ops: Operators): void {
  for (const { operator, problem } of stoppedBySettings(settings.operators)) {
    ctx.log.error(
      "an operator's settings are invalid: its primaries are not reconciled, and each says so on Ready; the other operators run",
      { controller: operator, issues: problem },
    );
  }
  for (const { controller, problems } of ops.refused ?? []) {
    ctx.log.error("an operator did not start: its primaries say so on Ready; the other operators run", {
      controller,
      problems,
    });
  }
}
