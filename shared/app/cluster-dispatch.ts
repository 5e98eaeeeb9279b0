/**
 * One platform deployment (a Worker, a Lambda stack), many clusters: one {@link Kubefn} in front
 * of a kubefn per declared cluster, each call handed to the cluster it is for. Each member has
 * its own kube (circuit, request budget), admission gate and sweep; this only routes.
 */
import { decodeCloudWatchLogs } from "../audit-export/index.ts";
import type { ClusterDeclaration } from "../credentials/index.ts";
import { clusterOf, type Log, type Metrics, openEnvelope, type SweepSummary } from "../runtime/index.ts";
import { clusterLog, clusterMetrics, type FleetMember, fleetFetch } from "./clusters.ts";
import type { IntakeCredentials } from "./intake/index.ts";
import { createKubefn } from "./kubefn.ts";
import type { Operators } from "./operators.ts";
import type { Delivery, Kubefn, KubefnPorts, Verdict } from "./ports.ts";
import type { KubefnSettings } from "./settings.ts";

/** One declared cluster's kubefn, as a platform built it. */
export interface ClusterKubefn extends FleetMember {
  kubefn: Kubefn;
  /**
   * The CloudWatch Logs groups its audit records arrive from (an EKS cluster's
   * `/aws/eks/<name>/cluster`): a delivery from another group is none of its.
   */
  logGroups?: readonly string[];
}

/** A fleet's sweep: each cluster's own summary (or why it failed), the clusters side by side. */
export interface FleetSweepSummary extends SweepSummary {
  clusters: Record<string, SweepSummary | { error: string }>;
}

/**
 * The settings one declared cluster's kubefn is built with: the deployment's, with the cluster's
 * own intake credentials (its intake checks a batch with these alone) and, for kubefn's OIDC
 * issuer, the cluster's own audience (a token minted for one cluster is refused by the next).
 */
export function clusterSettings(settings: KubefnSettings, declared: ClusterDeclaration): KubefnSettings {
  const { clusters: _all, auditToken: _a, relaySecret: _r, ...shared } = settings;
  const { credential } = declared;
  return {
    ...shared,
    ...intakeCredentialsOf(declared),
    ...(credential.kind === "oidc-issuer" && settings.oidcIssuer
      ? { oidcIssuer: { ...settings.oidcIssuer, audience: credential.audience } }
      : {}),
  };
}

/**
 * One declared cluster's member of a fleet: a kubefn with the cluster's settings
 * ({@link clusterSettings}), the kube `kubeOf` makes for them (the platform's transport to that
 * cluster, with its own circuit and budget), and `cluster` on its log lines and series; the rest of
 * `ports` (queue, prober, clock, state changes) is the deployment's, shared by every cluster.
 */
export function clusterMember(
  declared: ClusterDeclaration,
  settings: KubefnSettings,
  ports: Omit<KubefnPorts, "kube">,
  kubeOf: (settings: KubefnSettings) => Pick<KubefnPorts, "kube"> & Partial<KubefnPorts>,
  operators?: Operators,
): ClusterKubefn {
  const cluster = declared.name;
  const own = clusterSettings(settings, declared);
  const kubefn = createKubefn(
    own,
    {
      ...ports,
      ...kubeOf(own),
      cluster,
      log: clusterLog(ports.log, cluster),
      metrics: clusterMetrics(ports.metrics, cluster),
    },
    operators,
  );
  return { cluster, kubefn, credentials: intakeCredentialsOf(declared) };
}

/** A declared cluster's intake credentials: its audit token and relay secret, when set. */
export function intakeCredentialsOf(declared: ClusterDeclaration): IntakeCredentials {
  return {
    ...(declared.auditToken ? { auditToken: declared.auditToken } : {}),
    ...(declared.relaySecret ? { relaySecret: declared.relaySecret } : {}),
  };
}

/**
 * The fleet as one {@link Kubefn}:
 *
 * - `fetch`: {@link fleetFetch} — an intake batch goes to the cluster whose credential it presents;
 * - `consume`, `deadLetters`: each queue message to the kubefn of the cluster its envelope names
 *   (under kubefn's MAC); a message naming a cluster not declared here is dropped with an error
 *   line (`kubefn_messages_dropped_total{reason="other-cluster"}`), never run as another's. Each
 *   cluster's share of a batch runs side by side with the others'; verdicts come back in order;
 * - `sweep`: every cluster's sweep side by side, so a slow or unreachable cluster (each is bounded
 *   by its own request deadline, circuit and budget) delays no other's; a failed one is logged
 *   and the rest stand; it throws only when every cluster's failed;
 * - `ingest`: a CloudWatch Logs delivery to the cluster whose `logGroups` holds its log group;
 *   from any other group it is refused (counted, nothing enqueued).
 *
 * Caveats: a message without a cluster (a release before envelope version 3) is the `default`
 * cluster's; declare one named `default` to have those read.
 *
 * @example
 * const kubefn = dispatchByCluster(clusters.map((c) => ({ cluster: c.name, kubefn: build(c), credentials })), { log, metrics });
 */
export function dispatchByCluster(
  members: readonly ClusterKubefn[],
  platform: { log: Log; metrics: Metrics; maxBodyBytes: number },
): Kubefn {
  const [first] = members;
  if (!first) throw new Error("a fleet has at least one cluster");
  const byName = new Map(members.map((m) => [m.cluster, m]));
  const { log, metrics } = platform;

  /** The member a body is for; undefined for a pass or job of a cluster not declared here. */
  const memberOf = (body: unknown): ClusterKubefn | undefined => {
    const envelope = openEnvelope(body);
    // Not a message, or a newer release's: any member drops or retries it as its own would.
    if (envelope.kind !== "pass" && envelope.kind !== "job") return first;
    const cluster = clusterOf(envelope.message);
    const member = byName.get(cluster);
    if (!member) {
      log.error("queue message names a cluster this deployment does not declare; dropped", {
        cluster: String(cluster).slice(0, 63),
        declared: members.map((m) => m.cluster).join(","),
        kind: envelope.kind,
      });
      metrics.count("kubefn_messages_dropped_total", { reason: "other-cluster" });
    }
    return member;
  };

  const routed = async (
    deliveries: readonly Delivery[],
    handle: (member: ClusterKubefn, share: Delivery[]) => Promise<Verdict[]>,
  ): Promise<Verdict[]> => {
    const verdicts: Verdict[] = deliveries.map(() => ({ ack: true, dropped: true }));
    const shares = new Map<ClusterKubefn, number[]>();
    deliveries.forEach((d, i) => {
      const member = memberOf(d.body);
      if (member) shares.set(member, [...(shares.get(member) ?? []), i]);
    });
    await Promise.all(
      [...shares].map(async ([member, indices]) => {
        const answers = await handle(
          member,
          indices.map((i) => deliveries[i] as Delivery),
        );
        indices.forEach((at, k) => {
          verdicts[at] = answers[k] ?? { ack: true, dropped: true };
        });
      }),
    );
    return verdicts;
  };

  return {
    controllers: first.kubefn.controllers,
    fetch: fleetFetch(members),
    // Its own `fetch` shows every member's group on one page; this is the first's, for a caller
    // that asks one kubefn for its part.
    page: first.kubefn.page,
    consume: (deliveries, options) => routed(deliveries, (m, share) => m.kubefn.consume(share, options)),
    deadLetters: (deliveries) => routed(deliveries, (m, share) => m.kubefn.deadLetters(share)),
    async sweep(options) {
      const started = Date.now();
      const results = await Promise.allSettled(members.map((m) => m.kubefn.sweep(options)));
      const clusters: FleetSweepSummary["clusters"] = {};
      const failed: unknown[] = [];
      results.forEach((result, i) => {
        const { cluster } = members[i] as ClusterKubefn;
        if (result.status === "fulfilled") {
          clusters[cluster] = result.value;
          return;
        }
        failed.push(result.reason);
        clusters[cluster] = { error: String(result.reason) };
        clusterLog(log, cluster).error("sweep failed; the other clusters' sweeps stand", {
          error: String(result.reason),
        });
      });
      if (failed.length === members.length) throw new AggregateError(failed, "every cluster's sweep failed");
      const summaries = Object.values(clusters).filter((s): s is SweepSummary => !("error" in s));
      return {
        controllers: {},
        tasks: {},
        durationMs: Date.now() - started,
        ...(summaries.every((s) => s.heldBack) ? { heldBack: true } : {}),
        clusters,
      } satisfies FleetSweepSummary;
    },
    async ingest(delivery) {
      let logGroup: string;
      try {
        ({ logGroup } = await decodeCloudWatchLogs(delivery.data, platform.maxBodyBytes));
      } catch {
        // The member's intake counts and answers an undecodable delivery as it always does.
        return first.kubefn.ingest(delivery);
      }
      const member = members.find((m) => m.logGroups?.includes(logGroup));
      if (member) return member.kubefn.ingest(delivery);
      log.error("audit log delivery from a log group of no declared cluster; refused", {
        logGroup: logGroup.slice(0, 512),
      });
      metrics.count("kubefn_intake_rejected_total", { reason: "UnknownLogGroup" });
      return { enqueued: 0, acknowledged: "UnknownLogGroup", detail: logGroup.slice(0, 512) };
    },
  };
}
