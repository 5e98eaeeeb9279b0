/**
 * One deployment, many clusters: a kubefn per declared cluster (its own kube, circuit, admission
 * gate, request budget and sweep), and the one HTTP surface in front of them, which hands each
 * intake batch to the cluster whose credential it presented.
 */
import { bearerMatches, bearerToken, SIGNATURE_HEADER } from "../auth/index.ts";
import type { Log, Metrics } from "../runtime/index.ts";
import { groupedFleetPage } from "./fleet/index.ts";
import type { IntakeCredentials } from "./intake/index.ts";
import type { Kubefn } from "./ports.ts";

/** One declared cluster's kubefn and the credentials its intake batches arrive with. */
export interface FleetMember {
  cluster: string;
  /** Its HTTP surface, and its part of the fleet page (a member without one is left off the page). */
  kubefn: Pick<Kubefn, "fetch"> & Partial<Pick<Kubefn, "page">>;
  credentials: IntakeCredentials;
}

/**
 * The fleet's HTTP surface: `POST /v1/events` goes to the cluster whose credential the batch
 * presents — the audit bearer that equals one cluster's `auditToken`; for a relay batch (signed,
 * no bearer), the cluster its `?cluster=` names, whose intake then checks the signature with that
 * cluster's `relaySecret` alone. So a batch is only ever mapped, and its messages only ever
 * stamped, for the cluster whose credential it holds: cluster A's token or secret cannot deliver
 * events for cluster B. `GET /` without `?cluster=` is the fleet page of every cluster, a section
 * each, headed by its name (when there are several). Anything else goes to the cluster
 * `?cluster=` names, else the first.
 *
 * Caveats: a relay of a fleet of more than one relay-enabled cluster must name its cluster in its
 * intake URL (`…/v1/events?cluster=east`); the name only picks which secret checks the batch.
 *
 * @example
 * const fetch = fleetFetch([{ cluster: "east", kubefn: east, credentials: { auditToken } }, …]);
 */
export function fleetFetch(members: readonly FleetMember[]): (request: Request) => Promise<Response> {
  const [first] = members;
  if (!first) throw new Error("a fleet has at least one cluster");
  const named = (name: string | null) => members.find((m) => m.cluster === name);
  const page = fleetPageOf(members);
  return async (request) => {
    const url = new URL(request.url);
    const asked = url.searchParams.get("cluster");
    if (request.method === "POST" && url.pathname.startsWith("/v1/events")) {
      const member = await intakeMember(members, request, asked);
      if (!member) return refusal(asked);
      return member.kubefn.fetch(request);
    }
    if (page && asked === null && url.pathname === "/") return page.fetch(request);
    if (asked !== null && !named(asked))
      return Response.json({ error: `no cluster ${asked}` }, { status: 404 });
    return (named(asked) ?? first).kubefn.fetch(request);
  };
}

/** The page of every member's group, when there are several that have one. */
function fleetPageOf(
  members: readonly FleetMember[],
): { fetch(request: Request): Promise<Response> } | undefined {
  const parts = members.flatMap((m) => (m.kubefn.page ? [m.kubefn.page] : []));
  const [first, ...rest] = parts;
  if (!first || rest.length === 0) return undefined;
  const app = groupedFleetPage([first.group, ...rest.map((p) => p.group)], first.options);
  return { fetch: async (request) => app.fetch(request) };
}

async function intakeMember(
  members: readonly FleetMember[],
  request: Request,
  asked: string | null,
): Promise<FleetMember | undefined> {
  const bearer = bearerToken(request.headers.get("authorization") ?? undefined);
  if (bearer !== undefined) {
    // Each cluster's token compared in full (constant time each): which one matched is the answer.
    for (const member of members) {
      const { auditToken } = member.credentials;
      if (auditToken && (await bearerMatches(bearer, auditToken))) {
        return asked === null || asked === member.cluster ? member : undefined;
      }
    }
    return undefined;
  }
  if (!request.headers.has(SIGNATURE_HEADER)) return undefined;
  const relays = members.filter((m) => m.credentials.relaySecret);
  if (asked !== null) return relays.find((m) => m.cluster === asked);
  return relays.length === 1 ? relays[0] : undefined;
}

function refusal(asked: string | null): Response {
  return Response.json(
    {
      error:
        asked === null
          ? "a bearer token of a declared cluster, or a relay signature and ?cluster=<name>, is required"
          : `not a credential of cluster ${asked}`,
      reason: "Unauthenticated",
    },
    { status: 401 },
  );
}

/** `log` with `cluster` on every line. */
export function clusterLog(log: Log, cluster: string): Log {
  const withCluster = (fields?: Record<string, unknown>) => ({ cluster, ...fields });
  return {
    ...(log.debug ? { debug: (msg, f) => log.debug?.(msg, withCluster(f)) } : {}),
    info: (msg, f) => log.info(msg, withCluster(f)),
    warn: (msg, f) => log.warn(msg, withCluster(f)),
    error: (msg, f) => log.error(msg, withCluster(f)),
  } satisfies Log;
}

/**
 * `metrics` with a `cluster` label on every series: bounded, a declared cluster's name (at most
 * `MAX_CLUSTERS`), never a tenant's string.
 */
export function clusterMetrics(metrics: Metrics, cluster: string): Metrics {
  const withCluster = (labels?: Record<string, string>) => ({ ...labels, cluster });
  return {
    count: (name, labels, value) => metrics.count(name, withCluster(labels), value),
    observe: (name, value, labels) => metrics.observe(name, value, withCluster(labels)),
    gauge: (name, value, labels) => metrics.gauge(name, value, withCluster(labels)),
    ...(metrics.forget
      ? {
          forget: (name, which) =>
            metrics.forget?.(
              name,
              typeof which === "function"
                ? (labels) => labels.cluster === cluster && which(labels)
                : withCluster(which),
            ),
        }
      : {}),
  } satisfies Metrics;
}
