import {
  formatMicroTime,
  isAlreadyExists,
  isConflict,
  isNotFound,
  type Kube,
  type KubeObject,
  Resources,
} from "../../kube/index.ts";
import type { Log, Metrics } from "../core/index.ts";

/** The part of a `coordination.k8s.io/v1` Lease the sweep's owner writes. */
export interface SweepLeaseObject extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** The Lease record as a standby saw it: who holds it, which version, for how long. */
export interface ObservedLease {
  holder: string | undefined;
  version: string;
  durationSeconds: number;
}

/** When this replica first saw the Lease's current version, on its own clock (ms). */
export interface LeaseSighting {
  version: string;
  atMs: number;
}

/** What a replica does with the sweep Lease this period. */
export type LeaseStep = "create" | "renew" | "take" | "wait";

/**
 * Who owns this sweep period, decided purely. No holder yet, or a released Lease: take it. Ours:
 * renew it. Another replica's: wait until its record has not changed for its
 * `leaseDurationSeconds`, measured on this replica's own clock from the moment it first saw that
 * version, then take it.
 *
 * Caveats: expiry never compares this host's clock with the holder's `renewTime` (written by
 * another host, whose clock may be skewed): a record counts as renewed whenever its
 * resourceVersion changes, as client-go's leader election does. So a standby that has just
 * started waits one full duration before it takes a Lease whose holder died long ago.
 */
export function leaseStep(
  observed: ObservedLease | undefined,
  me: string,
  sighting: LeaseSighting | undefined,
  nowMs: number,
): { step: LeaseStep; sighting: LeaseSighting | undefined } {
  if (!observed) return { step: "create", sighting: undefined };
  if (observed.holder === me) return { step: "renew", sighting: undefined };
  if (!observed.holder) return { step: "take", sighting: undefined };
  if (sighting?.version !== observed.version)
    return { step: "wait", sighting: { version: observed.version, atMs: nowMs } };
  return nowMs - sighting.atMs >= observed.durationSeconds * 1000
    ? { step: "take", sighting: undefined }
    : { step: "wait", sighting };
}

export interface SweepLeaseOptions {
  kube: Kube;
  namespace: string;
  name: string;
  /** This replica's identity, unique among the replicas (a Pod's name; host name and pid). */
  holder: string;
  /** How long a holder that stops renewing keeps the sweep: two sweep periods is the usual. */
  durationSeconds: number;
  log: Log;
  metrics?: Metrics;
  /** A clock for intervals on this host only (ms); `performance.now` by default. */
  nowMs?: () => number;
  /** Wall time written into `renewTime` and `acquireTime` (for people reading the Lease). */
  wallClock?: () => Date;
}

/**
 * One owner per sweep period among the Node host's replicas: `hold()` each period says whether
 * this replica sweeps (and so probes) this period. The holder renews with one guarded update per
 * period (no read); a standby reads the Lease once per period. `release()` at shutdown hands the
 * sweep over at the standby's next period instead of after a full lease duration.
 *
 * Caveats: a replica that cannot reach the API server (an error, a Conflict) does not sweep that
 * period, holder or not: it cannot know that no one else took over. The standby takes over only
 * after a holder's record went a full lease duration unchanged on the standby's own clock, so a
 * holder that renews at least once per duration is never overtaken, however skewed the clocks.
 */
export interface SweepLease {
  hold(): Promise<boolean>;
  release(): Promise<void>;
  readonly holding: boolean;
}

export function createSweepLease(opts: SweepLeaseOptions): SweepLease {
  const { kube, namespace, name, holder, log } = opts;
  const nowMs = opts.nowMs ?? (() => performance.now());
  const wall = opts.wallClock ?? (() => new Date());
  const key = { namespace, name };
  let ours: SweepLeaseObject | undefined;
  let sighting: LeaseSighting | undefined;
  let holding = false;

  const count = (result: string) => opts.metrics?.count("kubefn_sweep_lease_total", { result });
  /** The Lease as this replica writes it: its holder, renewed now (and acquired now when taken). */
  const stamped = (lease: SweepLeaseObject, step: "create" | "renew" | "take"): SweepLeaseObject => {
    const now = formatMicroTime(wall());
    const spec = lease.spec ?? {};
    return {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: holder,
        leaseDurationSeconds: opts.durationSeconds,
        renewTime: now,
        ...(step === "renew"
          ? {}
          : { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + (step === "take" ? 1 : 0) }),
      },
    };
  };
  const settle = (held: boolean, previous?: string): boolean => {
    if (held && !holding)
      log.info("sweep lease acquired", { lease: `${namespace}/${name}`, holder, previous });
    if (!held && holding)
      log.warn("sweep lease lost: not sweeping", { lease: `${namespace}/${name}`, holder });
    holding = held;
    count(held ? "held" : "standby");
    return held;
  };
  const failed = (err: unknown): boolean => {
    log.warn("sweep lease not renewed: not sweeping this period", {
      lease: `${namespace}/${name}`,
      error: String(err),
    });
    count("error");
    ours = undefined;
    holding = false;
    return false;
  };

  async function hold(): Promise<boolean> {
    // The holder renews without a read: its last write's resourceVersion guards the update.
    if (ours) {
      try {
        ours = await kube.update<SweepLeaseObject>(Resources.Lease, stamped(ours, "renew"));
        return settle(true);
      } catch (err) {
        ours = undefined;
        if (!isConflict(err) && !isNotFound(err)) return failed(err);
      }
    }
    let observed: SweepLeaseObject | undefined;
    try {
      observed = await kube.get<SweepLeaseObject>(Resources.Lease, key);
    } catch (err) {
      if (!isNotFound(err)) return failed(err);
    }
    const decided = leaseStep(observed && observedOf(observed), holder, sighting, nowMs());
    sighting = decided.sighting;
    try {
      switch (decided.step) {
        case "create":
          ours = await kube.create<SweepLeaseObject>(
            Resources.Lease,
            stamped(leaseObject(namespace, name), "create"),
          );
          return settle(true);
        case "renew":
        case "take":
          ours = await kube.update<SweepLeaseObject>(Resources.Lease, stamped(observed!, decided.step));
          return settle(true, observed?.spec?.holderIdentity);
        case "wait":
          return settle(false);
      }
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err)) return settle(false);
      return failed(err);
    }
  }

  async function release(): Promise<void> {
    if (!ours || !holding) return;
    const { holderIdentity: _, ...spec } = ours.spec ?? {};
    try {
      await kube.update(Resources.Lease, { ...ours, spec });
      log.info("sweep lease released", { lease: `${namespace}/${name}`, holder });
    } catch (err) {
      log.warn("sweep lease not released: the standby takes over when it expires", { error: String(err) });
    }
    ours = undefined;
    holding = false;
  }

  return {
    hold,
    release,
    get holding() {
      return holding;
    },
  };
}

/** Labelled as kubefn's, so that the admission policy admits kubefn's writes to it. */
function leaseObject(namespace: string, name: string): SweepLeaseObject {
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      namespace,
      name,
      labels: { "crawl.kubefn.dev/managed-by": "kubefn", "app.kubernetes.io/component": "sweep-lease" },
    },
  };
}

function observedOf(lease: SweepLeaseObject): ObservedLease {
  return {
    holder: lease.spec?.holderIdentity || undefined,
    version: lease.metadata.resourceVersion ?? "",
    durationSeconds: lease.spec?.leaseDurationSeconds ?? 0,
  };
}
