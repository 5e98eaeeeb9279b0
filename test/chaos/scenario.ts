/**
 * The chaos scenario, shared by the chaos tests (short profile) and `npm run bench -- chaos` (full
 * profile): Managed Proxies on the Kubernetes pod provider are created, a share updated (new
 * cloud-init: the instance must be replaced) and a share deleted, while the fault proxy
 * (test/support/fault-proxy.ts) faults a share of kubefn's API requests. Then every object must
 * converge and nothing may leak:
 *
 * - every live Proxy: observedGeneration = generation, Provisioned=True, `status.providerID` names
 *   its Pod, and exactly one Pod carries its UID, running the current cloud-init (held by its
 *   cloud-init Secret, controlled by the Pod);
 * - no cloud-init Secret outlives its Pod (no orphaned owned object);
 * - every deleted Proxy is gone (no stuck finalizer) and no Pod carries a UID that is not a live
 *   Proxy's (no orphaned instance);
 * - after convergence, a quiet period changes nothing (no late duplicate create).
 *
 * kubefn runs behind a {@link Driver} (the Node host, or the Worker in workerd); the admin checks
 * go straight to the API server, unfaulted. Requests are counted at the fault proxy, so they are
 * what kubefn sent, answered or not.
 */

import { randomBytes } from "node:crypto";
import { optInNamespace } from "../../functions/node/install.ts";
import { type Proxy as ProxyObject, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { cloudInitSecretName } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import { managedByTagKey, ownerTagKey } from "../../shared/controllers/proxy/providers/provider.ts";
import { isNotFound, type Kube, type KubeObject, listAll, Resources } from "../../shared/kube/index.ts";
import type { FaultPlan, FaultProxy } from "../support/fault-proxy.ts";

type Proxy = ProxyObject & KubeObject;
type Pod = KubeObject & { status?: { phase?: string } };
type Secret = KubeObject & { data?: Record<string, string> };

/** kubefn under test, talking to the API server through the fault proxy. */
export interface Driver {
  /** Passes run so far (one per `pass` log line). */
  passes(): number;
  /**
   * Called every poll; a Worker driver runs its cron sweep here (at most every 3 s during a run,
   * every second during a teardown, where nothing is counted), the Node host needs nothing.
   */
  tick?(opts?: { teardown?: boolean }): Promise<void>;
  /** kubefn's last log lines naming `name` (a pass, a follow-up, an error), for a failure's message. */
  linesAbout?(name: string, limit?: number): string[];
}

/**
 * What kubefn last said, for a "not converged" failure: its last lines about `name` (the first
 * object left), then its last lines overall (a stalled sweep or circuit names no object).
 */
export function lastWords(driver: Driver | undefined, name: string | undefined): string {
  const about = name ? (driver?.linesAbout?.(name) ?? []) : [];
  const recent = driver?.linesAbout?.("", 15) ?? [];
  return (
    (about.length > 0 ? `\nkubefn's last lines about ${name}:\n  ${about.join("\n  ")}` : "") +
    (recent.length > 0 ? `\nkubefn's last lines:\n  ${recent.join("\n  ")}` : "")
  );
}

/** `driver` for a teardown: its ticks may come quicker (nothing is measured then). */
export function teardownDriver(driver: Driver | undefined): Driver | undefined {
  const tick = driver?.tick;
  if (!driver || !tick) return driver;
  return {
    passes: () => driver.passes(),
    tick: () => tick.call(driver, { teardown: true }),
    ...(driver.linesAbout ? { linesAbout: driver.linesAbout.bind(driver) } : {}),
  };
}

export interface ChaosProfile {
  /** Managed Proxies created. */
  objects: number;
  /** Share of them whose cloud-init is changed once they are Provisioned. */
  updateShare: number;
  /** Share deleted once they are Provisioned (disjoint from the updated ones). */
  deleteShare: number;
  /** Give up converging after this long. */
  timeoutMs: number;
  /** How long a converged state must hold before it counts. */
  quietMs: number;
  /** How often the checks run (each lists the run's Proxies, Pods and Secrets). */
  pollMs: number;
}

/**
 * `npm test`: one run at {@link SHORT_FAULT_RATE}, its requests held to
 * {@link requestBudget} (the bench compares with a fault-free run side by side).
 */
export const shortProfile: ChaosProfile = {
  objects: 20,
  updateShare: 1 / 3,
  deleteShare: 1 / 3,
  timeoutMs: 150_000,
  quietMs: 3000,
  pollMs: 500,
};
/** `npm run bench -- chaos`: 0 % and 20 % side by side. */
export const fullProfile: ChaosProfile = {
  objects: 1000,
  updateShare: 1 / 3,
  deleteShare: 1 / 3,
  timeoutMs: 1_200_000,
  quietMs: 5000,
  pollMs: 1000,
};

/** The fault rate of the short profile's one run. */
export const SHORT_FAULT_RATE = 0.2;
/** The full profile's runs: the fault-free baseline, then the faulted run. */
export const FULL_FAULT_RATES = [0, 0.2] as const;

/**
 * What a fault-free chaos run costs in requests kubefn sends, per object created (create → update
 * a third → delete a third → converged and quiet), at the short profile's counts. Measured in 0 %
 * runs beside 20 % ones:
 *
 * - Managed Proxies: 28.4 on the Node host (30 Proxies), 32 (10), 28.2 (1,000, `npm run bench --
 *   chaos`); 29.2 and 34.7 on the Worker in workerd (15, cron every 3 s), 40 (6);
 * - SubPools and Sites: 62.5–73 on the Node host (6 + 6), 102 (2 + 2), 68 (50 + 50, the bench);
 *   59.5 on the Worker (3 + 3).
 *
 * The sweep's lists are shared, so a run's fixed part (lists while it converges) weighs more
 * per object in a small run; from about ten objects up the per-object cost hardly moves, so the
 * short profile bounds its one faulted run with it instead of running the baseline again.
 */
export const CLEAN_REQUESTS_PER_OBJECT = { proxy: 30, operator: 75 } as const;

/**
 * The most requests a faulted run of `objects` objects may send: `factor` × what a fault-free run
 * sends ({@link CLEAN_REQUESTS_PER_OBJECT}). A retry storm (retries without backoff, a follow-up
 * at once after every failure) multiplies requests by the failures and breaks it; backoff does not.
 */
export function requestBudget(
  scenario: keyof typeof CLEAN_REQUESTS_PER_OBJECT,
  objects: number,
  factor: number,
): number {
  return Math.round(CLEAN_REQUESTS_PER_OBJECT[scenario] * objects * factor);
}

/** The faults of a chaos run at `rate`: every kind, slow answers past a 2 s client deadline. */
export function chaosFaults(rate: number, seed = 12): FaultPlan {
  return { rate, retryAfterSeconds: 1, slowMs: 3000, seed };
}

export interface ChaosResult {
  faultRate: number;
  objects: number;
  /** Requests kubefn sent (all of them reached the fault proxy). */
  requests: number;
  /** Of which the fault proxy faulted. */
  faulted: number;
  passes: number;
  /** From the first create to a converged state that held for the quiet period. */
  convergeMs: number;
  /** Of which until the created objects converged (the rest: their updates and deletes). */
  createdMs: number;
  /** Leaks and doubles found after convergence (empty when all is well). */
  leaks: string[];
}

/** What is wrong right now; empty when everything converged. */
export async function findProblems(
  kube: Kube,
  namespace: string,
  expected: ReadonlyMap<string, string>,
): Promise<{ pending: string[]; leaks: string[] }> {
  const pending: string[] = [];
  const leaks: string[] = [];
  const proxies = await listAll<Proxy>(kube, proxyResource, { namespace });
  const pods = await listAll<Pod>(kube, Resources.Pod, {
    namespace,
    labelSelector: `${managedByTagKey}=kubefn`,
  });
  const secrets = await listAll<Secret>(kube, Resources.Secret, {
    namespace,
    labelSelector: `${managedByTagKey}=kubefn`,
  });
  const secretsByName = new Map(secrets.map((x) => [x.metadata.name ?? "", x]));
  const podUids = new Set(pods.map((pod) => pod.metadata.uid));
  for (const secret of secrets) {
    const owner = secret.metadata.ownerReferences?.find((r) => r.controller)?.uid;
    if (!owner || !podUids.has(owner)) pending.push(`secret ${secret.metadata.name}: its Pod is gone`);
  }
  const podsByUid = new Map<string, Pod[]>();
  for (const pod of pods) {
    const uid = pod.metadata.labels?.[ownerTagKey] ?? "";
    podsByUid.set(uid, [...(podsByUid.get(uid) ?? []), pod]);
  }
  const live = new Set<string>();
  for (const p of proxies) {
    const name = p.metadata.name ?? "";
    const cloudInit = expected.get(name);
    if (cloudInit === undefined) {
      pending.push(`${name}: deleted but still present${p.metadata.deletionTimestamp ? " (finalizer)" : ""}`);
      continue;
    }
    const uid = p.metadata.uid ?? "";
    live.add(uid);
    const provisioned = p.status?.conditions?.find((c) => c.type === "Provisioned");
    const mine = (podsByUid.get(uid) ?? []).filter((pod) => !pod.metadata.deletionTimestamp);
    if (p.status?.observedGeneration !== p.metadata.generation)
      pending.push(`${name}: generation not observed`);
    else if (provisioned?.status !== "True") pending.push(`${name}: Provisioned=${provisioned?.status}`);
    else if (mine.length === 0) pending.push(`${name}: no instance`);
    else if (mine.length > 1) pending.push(`${name}: ${mine.length} instances`);
    else if (cloudInitOf(mine[0]!, secretsByName) !== cloudInit)
      pending.push(`${name}: instance has stale cloud-init`);
    else if (!p.status?.providerID?.endsWith(`/${mine[0]!.metadata.name}`))
      pending.push(`${name}: providerID ${p.status?.providerID} is not its instance`);
  }
  for (const name of expected.keys()) {
    if (!proxies.some((p) => p.metadata.name === name)) leaks.push(`${name}: the Proxy itself is gone`);
  }
  for (const [uid, owned] of podsByUid) {
    if (!live.has(uid)) pending.push(...owned.map((pod) => `pod ${pod.metadata.name}: owner ${uid} is gone`));
  }
  return { pending, leaks };
}

/** The cloud-init an instance runs: its cloud-init Secret's user data, if the Secret is the Pod's. */
function cloudInitOf(pod: Pod, secrets: ReadonlyMap<string, Secret>): string | undefined {
  const secret = secrets.get(cloudInitSecretName(pod.metadata.name ?? ""));
  if (!secret?.metadata.ownerReferences?.some((r) => r.uid === pod.metadata.uid)) return undefined;
  const data = secret.data?.["user-data"];
  return data === undefined ? undefined : Buffer.from(data, "base64").toString("utf8");
}

function managedProxy(namespace: string, name: string, cloudInit: string): Proxy {
  return {
    apiVersion: "crawl.kubefn.dev/v1alpha1",
    kind: "Proxy",
    metadata: { name, namespace },
    spec: {
      mode: "Managed",
      provider: "kubernetes",
      cloudInit: { inline: cloudInit },
    },
  } as Proxy;
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

/**
 * One chaos run in a fresh namespace: configure the faults, create, wait for every Proxy to be
 * Provisioned, update and delete shares of them, wait for convergence and a quiet period. The
 * fault proxy's counters are reset at the start and read at the end.
 *
 * Caveats: the namespace is left behind for the caller to delete (after the faults are off, so
 * the finalizers run quickly).
 */
export async function runChaos(opts: {
  admin: Kube;
  faults: FaultProxy;
  driver: Driver;
  profile: ChaosProfile;
  faultRate: number;
  log?: (line: string) => void;
}): Promise<ChaosResult & { namespace: string }> {
  const { admin, faults, driver, profile, faultRate } = opts;
  const log = opts.log ?? (() => undefined);
  const namespace = `chaos-${Math.round(faultRate * 100)}-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(admin, namespace);
  const names = Array.from({ length: profile.objects }, (_, i) => `px-${String(i).padStart(4, "0")}`);
  const expected = new Map(names.map((n) => [n, "#cloud-config v1"]));

  faults.configure(chaosFaults(faultRate));
  faults.resetStats();
  const passesBefore = driver.passes();
  const started = Date.now();

  await poolMap(names, 16, (name) =>
    admin.create(proxyResource, managedProxy(namespace, name, "#cloud-config v1")).then(() => undefined),
  );
  await converge(admin, namespace, expected, driver, profile, log, "created");
  const createdMs = Date.now() - started;

  const updated = names
    .filter((_, i) => i % 3 === 0)
    .slice(0, Math.round(profile.objects * profile.updateShare));
  const deleted = names
    .filter((_, i) => i % 3 === 1)
    .slice(0, Math.round(profile.objects * profile.deleteShare));
  await poolMap(updated, 16, async (name) => {
    await admin.patch(
      proxyResource,
      { namespace, name },
      {
        type: "merge",
        body: { spec: { cloudInit: { inline: "#cloud-config v2" } } },
      },
    );
    expected.set(name, "#cloud-config v2");
  });
  await poolMap(deleted, 16, async (name) => {
    await admin.delete(proxyResource, { namespace, name });
    expected.delete(name);
  });
  await converge(admin, namespace, expected, driver, profile, log, "updated and deleted", started);

  const convergeMs = Date.now() - started;
  const stats = faults.stats();
  const passes = driver.passes() - passesBefore;
  const { pending, leaks } = await findProblems(admin, namespace, expected);
  return {
    namespace,
    faultRate,
    objects: profile.objects,
    requests: stats.requests,
    faulted: stats.faulted,
    passes,
    convergeMs,
    createdMs,
    leaks: [...leaks, ...pending],
  };
}

async function converge(
  admin: Kube,
  namespace: string,
  expected: ReadonlyMap<string, string>,
  driver: Driver,
  profile: ChaosProfile,
  log: (line: string) => void,
  what: string,
  since = Date.now(),
): Promise<void> {
  const deadline = Date.now() + profile.timeoutMs;
  let convergedAt: number | undefined;
  let last: string[] = [];
  for (;;) {
    await driver.tick?.();
    const { pending, leaks } = await findProblems(admin, namespace, expected).catch((err: unknown) => {
      if (isNotFound(err)) return { pending: ["namespace gone"], leaks: [] };
      throw err;
    });
    const problems = [...leaks, ...pending];
    if (problems.length === 0) {
      convergedAt ??= Date.now();
      if (Date.now() - convergedAt >= profile.quietMs) {
        log(`${namespace} ${what}: converged after ${Date.now() - since} ms`);
        return;
      }
    } else {
      convergedAt = undefined;
      if (problems.join() !== last.join())
        log(`${namespace} ${what}: ${problems.length} pending, e.g. ${problems[0]}`);
      last = problems;
    }
    if (Date.now() > deadline) {
      const first = /^(\S+?):/.exec(problems[0] ?? "")?.[1];
      throw new Error(
        `${namespace} ${what}: not converged in ${profile.timeoutMs} ms: ${problems.slice(0, 10).join("; ")}` +
          lastWords(driver, first),
      );
    }
    await new Promise((r) => setTimeout(r, profile.pollMs));
  }
}

export interface OutageResult {
  /** Requests kubefn sent while the API server answered every one with 503. */
  requestsDuringOutage: number;
  outageMs: number;
  /** From the end of the outage to convergence. */
  recoverMs: number;
  leaks: string[];
}

/**
 * A struggling API server: `objects` Managed Proxies are created, and once kubefn is at work on
 * all of them, every request it sends is answered 503 (Retry-After 1) for `outageMs`; then the
 * server recovers and everything must converge. Measures what kubefn sent during the outage —
 * with the circuit, it should be little.
 */
export async function runOutage(opts: {
  admin: Kube;
  faults: FaultProxy;
  driver: Driver;
  objects: number;
  outageMs: number;
  timeoutMs?: number;
}): Promise<OutageResult & { namespace: string }> {
  const { admin, faults, driver } = opts;
  const namespace = `outage-${randomBytes(3).toString("hex")}`;
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await optInNamespace(admin, namespace);
  const names = Array.from({ length: opts.objects }, (_, i) => `px-${String(i).padStart(4, "0")}`);
  const expected = new Map(names.map((n) => [n, "#cloud-config v1"]));
  await poolMap(names, 16, (name) =>
    admin.create(proxyResource, managedProxy(namespace, name, "#cloud-config v1")).then(() => undefined),
  );
  // The outage starts once kubefn is at work on every Proxy (its finalizer is on), so passes and
  // their follow-ups are in flight when the server starts failing.
  const atWork = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    await driver.tick?.();
    const proxies = await listAll<Proxy>(admin, proxyResource, { namespace });
    if (proxies.every((p) => (p.metadata.finalizers ?? []).length > 0)) break;
    if (Date.now() > atWork) throw new Error(`${namespace}: kubefn never started on every Proxy`);
    await new Promise((r) => setTimeout(r, 200));
  }
  faults.configure({ rate: 1, mix: { "503": 1 }, retryAfterSeconds: 1 });
  faults.resetStats();
  const started = Date.now();
  while (Date.now() - started < opts.outageMs) {
    await driver.tick?.();
    await new Promise((r) => setTimeout(r, 1000));
  }
  const requestsDuringOutage = faults.stats().requests;
  const outageMs = Date.now() - started;
  faults.configure({ rate: 0 });
  const recovered = Date.now();
  await converge(
    admin,
    namespace,
    expected,
    driver,
    {
      objects: opts.objects,
      updateShare: 0,
      deleteShare: 0,
      timeoutMs: opts.timeoutMs ?? 120_000,
      quietMs: 2000,
      pollMs: 500,
    },
    () => undefined,
    "after the outage",
  );
  const recoverMs = Date.now() - recovered;
  const { pending, leaks } = await findProblems(admin, namespace, expected);
  return { namespace, requestsDuringOutage, outageMs, recoverMs, leaks: [...leaks, ...pending] };
}

/**
 * Deletes a run's namespace and waits until it is gone (ticking the driver, so a Worker's cron runs
 * the Proxies' finalizers), so its passes are not counted in the next run. Turn the faults off
 * first. Resolves false if it is still there after `timeoutMs`.
 */
export async function removeNamespace(
  admin: Kube,
  name: string,
  driver?: Driver,
  timeoutMs = 120_000,
): Promise<boolean> {
  await admin.delete(Resources.Namespace, { name }).catch(() => undefined);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const err = await admin.get(Resources.Namespace, { name }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (isNotFound(err)) return true;
    await driver?.tick?.({ teardown: true });
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

/**
 * The Proxy scenario at each of `rates` in turn (the full profile: {@link FULL_FAULT_RATES}), each
 * run's namespace removed with the faults off before the next run starts.
 */
export async function runChaosAtRates(opts: {
  admin: Kube;
  faults: FaultProxy;
  driver: Driver;
  profile: ChaosProfile;
  rates: readonly number[];
  log?: (line: string) => void;
  /** Namespace removal timeout (the bench's 1,000 Proxies need minutes). */
  removeTimeoutMs?: number;
}): Promise<ChaosResult[]> {
  const results: ChaosResult[] = [];
  for (const faultRate of opts.rates) {
    const r = await runChaos({ ...opts, faultRate });
    results.push(r);
    opts.faults.configure({ rate: 0 });
    if (!(await removeNamespace(opts.admin, r.namespace, opts.driver, opts.removeTimeoutMs)))
      throw new Error(`namespace ${r.namespace} not gone after its run`);
  }
  return results;
}

/** One line per run, for the test output and the bench's log. */
export function chaosRow(r: ChaosResult, platform = ""): string {
  return `${platform}${Math.round(r.faultRate * 100)}% faults: ${r.objects} objects, ${r.requests} requests (${r.faulted} faulted), ${r.passes} passes, converged in ${r.convergeMs} ms (created ${r.createdMs} ms, then updated and deleted), ${r.leaks.length} leaks`;
}
