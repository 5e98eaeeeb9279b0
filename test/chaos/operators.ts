/**
 * The chaos scenario for SubPool and Site (the Proxy's is scenario.ts), shared by the chaos tests
 * (short profile) and `npm run bench -- chaos` (larger counts): SubPools and Sites are created,
 * a share updated and a share deleted, while the fault proxy faults a share of kubefn's API
 * requests. Then everything must converge, and nothing may leak or be doubled:
 *
 * - every live SubPool: its finalizer, observedGeneration = generation, `status.namespace` set, a
 *   settled Ready condition (Ready, or ProxyGatewayNotReady where no shared proxy gateway runs);
 *   its Namespace controlled by it (this UID) and not terminating; in it exactly the 8 objects a
 *   pool derives (no duplicate or stray object of those kinds carrying the pool's labels), each
 *   controlled by the pool; the StatefulSet runs
 *   the current cpa image;
 * - every deleted SubPool gone (no stuck finalizer), with its Namespace (no orphaned content);
 * - every live Site: observedGeneration = generation, its four conditions True (Reconciled, or
 *   Disabled for a component switched off); exactly its per-Site objects in the operator
 *   namespace (metalman config and Deployment, storage config unless switched off), each
 *   controlled by this Site's UID;
 * - no per-Site object of a deleted Site left (the garbage collector removes them through their
 *   ownerReferences; one pointing at a gone UID counts as pending until it has).
 *
 * Each check is one function returning what is wrong right now (empty when converged).
 */
import { randomBytes } from "node:crypto";
import { siteLabelKey, siteResource } from "../../shared/controllers/site/api.ts";
import {
  subPoolFinalizer,
  subPoolManagedLabel,
  subPoolManagedValue,
  subPoolNamespaceName,
  subPoolPoolLabel,
  subPoolResource,
} from "../../shared/controllers/subpool/api.ts";
import { subPoolObjectNames } from "../../shared/controllers/subpool/desired.ts";
import {
  type Condition,
  type Kube,
  type KubeObject,
  listAll,
  type Resource,
  Resources,
} from "../../shared/kube/index.ts";
import type { FaultProxy } from "../support/fault-proxy.ts";
import { chaosFaults, type Driver, lastWords, teardownDriver } from "./scenario.ts";

type WithStatus = KubeObject & {
  status?: { observedGeneration?: number; namespace?: string; conditions?: Condition[] };
};

const controllerUid = (o: KubeObject) => o.metadata.ownerReferences?.find((r) => r.controller)?.uid;

/** One operator's share of a chaos run: what to create, update and delete, and what to check. */
export interface OperatorChaos {
  operator: "subpool" | "site";
  /** Names of the objects this run made (all cluster-scoped). */
  names: readonly string[];
  create(name: string): Promise<void>;
  update(name: string): Promise<void>;
  delete(name: string): Promise<void>;
  /** What is wrong right now; empty when everything converged. */
  problems(): Promise<string[]>;
  /**
   * Deletes what is left of the run's objects and waits until they and everything derived from
   * them are gone (turn the faults off first; `driver` ticks a Worker's cron meanwhile).
   */
  cleanup(driver?: Driver): Promise<void>;
}

/** The kinds a SubPool derives inside its Namespace, and the name of each. */
function subPoolContents(name: string): Array<[Resource, string]> {
  const n = subPoolObjectNames(name);
  return [
    [Resources.Secret, n.credentials],
    [Resources.ServiceAccount, n.serviceAccount],
    [Resources.ConfigMap, n.config],
    [Resources.ResourceQuota, n.resourceQuota],
    [Resources.NetworkPolicy, n.networkPolicy],
    [Resources.Service, n.service],
    [Resources.StatefulSet, n.statefulSet],
    [Resources.PodDisruptionBudget, n.podDisruptionBudget],
  ];
}

const cpaImage = (tag: string) => `ghcr.io/subrelay/cpa:${tag}`;

function subPoolSpec(tag: string): Record<string, unknown> {
  return {
    exposure: { mode: "Internal" },
    storage: { size: "1Gi" },
    cpa: { image: cpaImage(tag), resources: { requests: { cpu: "100m", memory: "128Mi" } } },
    cpaManager: {
      image: "ghcr.io/subrelay/cpa-manager:1.4.0",
      resources: { requests: { cpu: "100m", memory: "128Mi" } },
    },
  };
}

/**
 * SubPools `<prefix>-<i>`: created with cpa 1.4.0; an update moves cpa to 1.5.0 (the StatefulSet
 * must follow).
 */
export function subPoolChaos(admin: Kube, count: number, prefix = `cs-${randomBytes(3).toString("hex")}`) {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  const expected = new Map<string, string>();
  const chaos: OperatorChaos = {
    operator: "subpool",
    names,
    async create(name) {
      await admin.create(subPoolResource, {
        apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
        kind: "SubPool",
        metadata: { name },
        spec: subPoolSpec("1.4.0"),
      });
      expected.set(name, "1.4.0");
    },
    async update(name) {
      await admin.patch(
        subPoolResource,
        { name },
        { type: "merge", body: { spec: { cpa: { image: cpaImage("1.5.0") } } } },
      );
      expected.set(name, "1.5.0");
    },
    async delete(name) {
      await admin.delete(subPoolResource, { name });
      expected.delete(name);
    },
    problems: () => subPoolProblems(admin, prefix, expected),
    async cleanup(driver) {
      expected.clear();
      for (const name of names) await admin.delete(subPoolResource, { name }).catch(() => undefined);
      await convergeAll(
        () => subPoolProblems(admin, prefix, expected),
        teardownDriver(driver),
        cleanupProfile,
      );
    },
  };
  return chaos;
}

async function subPoolProblems(
  admin: Kube,
  prefix: string,
  expected: ReadonlyMap<string, string>,
): Promise<string[]> {
  const problems: string[] = [];
  const ours = (name: string | undefined) => (name ?? "").startsWith(`${prefix}-`);
  const pools = (await listAll<WithStatus>(admin, subPoolResource)).filter((p) => ours(p.metadata.name));
  const managed = `${subPoolManagedLabel}=${subPoolManagedValue}`;
  const namespaces = (await listAll(admin, Resources.Namespace, { labelSelector: managed })).filter((ns) =>
    ours(ns.metadata.labels?.[subPoolPoolLabel]),
  );
  // Every derived object of this run, by kind, in one list each.
  const contents = new Map<Resource, KubeObject[]>();
  for (const [resource] of subPoolContents(prefix)) {
    const all = await listAll(admin, resource, { labelSelector: managed });
    contents.set(
      resource,
      all.filter((o) => ours(o.metadata.labels?.[subPoolPoolLabel])),
    );
  }

  const live = new Map<string, string>();
  for (const pool of pools) {
    const name = pool.metadata.name ?? "";
    const tag = expected.get(name);
    if (tag === undefined) {
      problems.push(
        `subpool ${name}: deleted but still present${pool.metadata.deletionTimestamp ? " (finalizer)" : ""}`,
      );
      continue;
    }
    const uid = pool.metadata.uid ?? "";
    live.set(name, uid);
    const ready = pool.status?.conditions?.find((c) => c.type === "Ready");
    if (!pool.metadata.finalizers?.includes(subPoolFinalizer)) problems.push(`subpool ${name}: no finalizer`);
    else if (pool.status?.observedGeneration !== pool.metadata.generation)
      problems.push(`subpool ${name}: generation not observed`);
    else if (pool.status?.namespace !== subPoolNamespaceName(name))
      problems.push(`subpool ${name}: status.namespace ${pool.status?.namespace}`);
    else if (ready?.reason !== "Ready" && ready?.reason !== "ProxyGatewayNotReady")
      problems.push(`subpool ${name}: Ready ${ready?.status} ${ready?.reason}`);

    const ns = namespaces.filter((n) => n.metadata.name === subPoolNamespaceName(name));
    if (ns.length !== 1 || controllerUid(ns[0]!) !== uid || ns[0]!.metadata.deletionTimestamp)
      problems.push(`subpool ${name}: its Namespace is missing, not controlled by it or terminating`);
    for (const [resource, objectName] of subPoolContents(name)) {
      const found = (contents.get(resource) ?? []).filter(
        (o) => o.metadata.labels?.[subPoolPoolLabel] === name,
      );
      const names = found.map((o) => o.metadata.name).sort();
      if (names.length !== 1 || names[0] !== objectName)
        problems.push(`subpool ${name}: ${resource.kind} ${JSON.stringify(names)}, want ["${objectName}"]`);
      else if (controllerUid(found[0]!) !== uid)
        problems.push(`subpool ${name}: ${resource.kind} ${objectName} not controlled by the pool`);
      else if (found[0]!.metadata.namespace !== subPoolNamespaceName(name))
        problems.push(`subpool ${name}: ${resource.kind} ${objectName} outside its Namespace`);
      else if (resource === Resources.StatefulSet && imageOf(found[0]!, "cpa") !== cpaImage(tag))
        problems.push(
          `subpool ${name}: StatefulSet runs ${imageOf(found[0]!, "cpa")}, want ${cpaImage(tag)}`,
        );
    }
  }
  for (const name of expected.keys()) {
    if (!live.has(name)) problems.push(`subpool ${name}: the SubPool itself is gone`);
  }
  for (const ns of namespaces) {
    const pool = ns.metadata.labels?.[subPoolPoolLabel] ?? "";
    if (!live.has(pool)) problems.push(`namespace ${ns.metadata.name}: its SubPool is gone`);
  }
  for (const [resource, objects] of contents) {
    for (const o of objects) {
      const pool = o.metadata.labels?.[subPoolPoolLabel] ?? "";
      if (!live.has(pool) || controllerUid(o) !== live.get(pool))
        problems.push(`${resource.kind} ${o.metadata.namespace}/${o.metadata.name}: its SubPool is gone`);
    }
  }
  return problems;
}

function imageOf(statefulSet: KubeObject, container: string): string | undefined {
  const spec = statefulSet.spec as
    | { template?: { spec?: { containers?: Array<{ name: string; image?: string }> } } }
    | undefined;
  return spec?.template?.spec?.containers?.find((c) => c.name === container)?.image;
}

/**
 * Sites `<prefix>-<i>` with every component on; an update switches storage off (its per-Site
 * ConfigMap must be deleted, StorageReady must read Disabled). `namespace` is the operator
 * namespace the per-Site objects live in (`SITE_NAMESPACE`, kubefn-system by default).
 */
export function siteChaos(
  admin: Kube,
  count: number,
  namespace = "kubefn-system",
  prefix = `cst-${randomBytes(3).toString("hex")}`,
) {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  /** Site name → whether storage is on. */
  const expected = new Map<string, boolean>();
  const chaos: OperatorChaos = {
    operator: "site",
    names,
    async create(name) {
      await admin.create(siteResource, {
        apiVersion: `${siteResource.group}/${siteResource.version}`,
        kind: "Site",
        metadata: { name },
        spec: { displayName: "chaos" },
      });
      expected.set(name, true);
    },
    async update(name) {
      await admin.patch(
        siteResource,
        { name },
        { type: "merge", body: { spec: { components: { storage: { enabled: false } } } } },
      );
      expected.set(name, false);
    },
    async delete(name) {
      await admin.delete(siteResource, { name });
      expected.delete(name);
    },
    problems: () => siteProblems(admin, prefix, namespace, expected),
    async cleanup(driver) {
      expected.clear();
      for (const name of names) await admin.delete(siteResource, { name }).catch(() => undefined);
      await convergeAll(
        () => siteProblems(admin, prefix, namespace, expected),
        teardownDriver(driver),
        cleanupProfile,
      );
    },
  };
  return chaos;
}

async function siteProblems(
  admin: Kube,
  prefix: string,
  namespace: string,
  expected: ReadonlyMap<string, boolean>,
): Promise<string[]> {
  const problems: string[] = [];
  const ours = (name: string | undefined) => (name ?? "").startsWith(`${prefix}-`);
  const sites = (await listAll<WithStatus>(admin, siteResource)).filter((s) => ours(s.metadata.name));
  const perSite: Array<{ kind: string; object: KubeObject }> = [];
  for (const resource of [Resources.ConfigMap, Resources.Deployment]) {
    const listed = await listAll(admin, resource, { namespace, labelSelector: siteLabelKey });
    for (const object of listed.filter((o) => ours(o.metadata.labels?.[siteLabelKey])))
      perSite.push({ kind: resource.kind, object });
  }
  const live = new Map<string, string>();
  for (const site of sites) {
    const name = site.metadata.name ?? "";
    const storage = expected.get(name);
    if (storage === undefined) {
      problems.push(`site ${name}: deleted but still present`);
      continue;
    }
    const uid = site.metadata.uid ?? "";
    live.set(name, uid);
    const conditions = site.status?.conditions ?? [];
    const want: Array<[string, string]> = [
      ["NetReady", "Reconciled"],
      ["MachinaReady", "Reconciled"],
      ["MetalmanReady", "Reconciled"],
      ["StorageReady", storage ? "Reconciled" : "Disabled"],
    ];
    if (site.status?.observedGeneration !== site.metadata.generation)
      problems.push(`site ${name}: generation not observed`);
    for (const [type, reason] of want) {
      const c = conditions.find((x) => x.type === type);
      if (c?.status !== "True" || c.reason !== reason)
        problems.push(`site ${name}: ${type} ${c?.status} ${c?.reason}, want True ${reason}`);
    }
    const mine = perSite.filter((o) => o.object.metadata.labels?.[siteLabelKey] === name);
    const got = mine.map((o) => `${o.kind} ${o.object.metadata.name}`).sort();
    const wanted = [
      `ConfigMap metalman-${name}`,
      ...(storage ? [`ConfigMap storage-${name}`] : []),
      `Deployment metalman-${name}`,
    ].sort();
    if (JSON.stringify(got) !== JSON.stringify(wanted))
      problems.push(`site ${name}: per-Site objects ${JSON.stringify(got)}, want ${JSON.stringify(wanted)}`);
    for (const { object } of mine) {
      if (controllerUid(object) !== uid)
        problems.push(`site ${name}: ${object.metadata.name} not controlled by this Site`);
    }
  }
  for (const name of expected.keys()) {
    if (!live.has(name)) problems.push(`site ${name}: the Site itself is gone`);
  }
  for (const { kind, object } of perSite) {
    const site = object.metadata.labels?.[siteLabelKey] ?? "";
    if (!live.has(site)) problems.push(`${kind} ${object.metadata.name}: its Site is gone`);
  }
  return problems;
}

const cleanupProfile = { timeoutMs: 600_000, quietMs: 0, pollMs: 500 };

export interface OperatorChaosProfile {
  /** Share of each operator's objects updated once converged, and share deleted (disjoint). */
  updateShare: number;
  deleteShare: number;
  timeoutMs: number;
  quietMs: number;
  /** How often the checks run (each is a dozen lists). */
  pollMs: number;
}

/** `npm test`: one run at 20 % (scenario.ts SHORT_FAULT_RATE), its requests held to a budget. */
export const operatorShortProfile: OperatorChaosProfile = {
  updateShare: 1 / 3,
  deleteShare: 1 / 3,
  timeoutMs: 150_000,
  quietMs: 2000,
  pollMs: 500,
};
/** `npm run bench -- chaos`: 0 % and 20 % side by side, larger counts. */
export const operatorFullProfile: OperatorChaosProfile = {
  updateShare: 1 / 3,
  deleteShare: 1 / 3,
  timeoutMs: 1_200_000,
  quietMs: 5000,
  pollMs: 1000,
};

export interface OperatorChaosResult {
  faultRate: number;
  objects: Record<string, number>;
  requests: number;
  faulted: number;
  passes: number;
  convergeMs: number;
  leaks: string[];
}

/**
 * One chaos run of `operators` at once: the faults at `faultRate`, every object created, converged,
 * a share updated and a share deleted, converged and quiet. Requests are counted at the fault
 * proxy from the first create to convergence (so only what kubefn sent, for everything it ran).
 *
 * Caveats: the objects are left for the caller's `cleanup` (after the faults are off).
 */
export async function runOperatorChaos(opts: {
  faults: FaultProxy;
  driver: Driver;
  operators: readonly OperatorChaos[];
  faultRate: number;
  profile: OperatorChaosProfile;
  log?: (line: string) => void;
}): Promise<OperatorChaosResult> {
  const { faults, driver, operators, profile } = opts;
  const log = opts.log ?? (() => undefined);
  const check = async () => (await Promise.all(operators.map((o) => o.problems()))).flat();
  faults.configure(chaosFaults(opts.faultRate));
  faults.resetStats();
  const passesBefore = driver.passes();
  const started = Date.now();
  try {
    await Promise.all(operators.map((o) => poolMap(o.names, 8, (name) => o.create(name))));
    await convergeAll(check, driver, profile, log, "created");
    await Promise.all(
      operators.map(async (o) => {
        const updated = o.names
          .filter((_, i) => i % 3 === 0)
          .slice(0, Math.round(o.names.length * profile.updateShare));
        const deleted = o.names
          .filter((_, i) => i % 3 === 1)
          .slice(0, Math.round(o.names.length * profile.deleteShare));
        await poolMap(updated, 8, (name) => o.update(name));
        await poolMap(deleted, 8, (name) => o.delete(name));
      }),
    );
    await convergeAll(check, driver, profile, log, "updated and deleted");
  } catch (err) {
    faults.configure({ rate: 0 });
    throw err;
  }
  const convergeMs = Date.now() - started;
  const stats = faults.stats();
  return {
    faultRate: opts.faultRate,
    objects: Object.fromEntries(operators.map((o) => [o.operator, o.names.length])),
    requests: stats.requests,
    faulted: stats.faulted,
    passes: driver.passes() - passesBefore,
    convergeMs,
    leaks: await check(),
  };
}

/** Polls `check` (and ticks the driver) until it finds nothing for `quietMs`; throws at the timeout. */
export async function convergeAll(
  check: () => Promise<string[]>,
  driver: Driver | undefined,
  profile: Pick<OperatorChaosProfile, "timeoutMs" | "quietMs" | "pollMs">,
  log: (line: string) => void = () => undefined,
  what = "converged",
): Promise<void> {
  const started = Date.now();
  let quietSince: number | undefined;
  let last = "";
  for (;;) {
    await driver?.tick?.();
    const problems = await check();
    if (problems.length === 0) {
      quietSince ??= Date.now();
      if (Date.now() - quietSince >= profile.quietMs) {
        log(`${what}: converged after ${Date.now() - started} ms`);
        return;
      }
    } else {
      quietSince = undefined;
      if (problems.join() !== last) log(`${what}: ${problems.length} pending, e.g. ${problems[0]}`);
      last = problems.join();
    }
    if (Date.now() - started > profile.timeoutMs) {
      // What kubefn last said about the first one left (its passes, follow-ups, errors).
      const name = /^\w+ (\S+?):/.exec(problems[0] ?? "")?.[1];
      throw new Error(
        `${what}: not converged in ${profile.timeoutMs} ms: ${problems.slice(0, 10).join("; ")}` +
          lastWords(driver, name),
      );
    }
    await new Promise((r) => setTimeout(r, profile.pollMs));
  }
}

/**
 * SubPools and Sites, `count` of each, at each of `rates` in turn (the full profile: scenario.ts
 * FULL_FAULT_RATES); each run's objects are cleaned up with the faults off before the next run
 * starts. Every run's operators are pushed to `leftovers` first, for an afterAll to clean up
 * after a failure.
 */
export async function runOperatorChaosAtRates(opts: {
  admin: Kube;
  faults: FaultProxy;
  driver: Driver;
  count: number;
  rates: readonly number[];
  profile: OperatorChaosProfile;
  leftovers?: OperatorChaos[];
  log?: (line: string) => void;
}): Promise<OperatorChaosResult[]> {
  const results: OperatorChaosResult[] = [];
  for (const faultRate of opts.rates) {
    const operators = [subPoolChaos(opts.admin, opts.count), siteChaos(opts.admin, opts.count)];
    opts.leftovers?.push(...operators);
    const log = opts.log;
    results.push(
      await runOperatorChaos({
        ...opts,
        operators,
        faultRate,
        ...(log ? { log: (l: string) => log(`${Math.round(faultRate * 100)}% ${l}`) } : {}),
      }),
    );
    opts.faults.configure({ rate: 0 });
    for (const o of operators) await o.cleanup(opts.driver);
  }
  return results;
}

/** One line per run, for the test output and the bench's log. */
export function operatorChaosRow(r: OperatorChaosResult, platform = ""): string {
  const objects = Object.entries(r.objects)
    .map(([k, n]) => `${n} ${k}s`)
    .join(" + ");
  return `${platform}${Math.round(r.faultRate * 100)}% faults: ${objects}, ${r.requests} requests (${r.faulted} faulted), ${r.passes} passes, converged in ${r.convergeMs} ms, ${r.leaks.length} leaks`;
}

async function poolMap<T>(
  items: readonly T[],
  limit: number,
  run: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}
