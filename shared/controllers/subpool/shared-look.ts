/**
 * The seed's 30 s look at what no pool owns (seed 003: "requeue every 30 s while active"), at a
 * cost that does not grow with the pools: the shared proxy gateway (Mihomo's EndpointSlices) and
 * each Gateway a pool routes through are read once per half drift period for every pool together,
 * and passes go only to the pools a change concerns.
 *
 * The drift pass reads them at the start of each drift period (60 s) and sends a pass to every
 * pool whose conditions they contradict; this task, run in the same sweep, records what the
 * drift saw and sends one job delayed half the period (30 s). The job reads them again (one
 * list, one GET per Gateway) and, only when something changed, lists the pools and sends a pass
 * to each active pool the change concerns. So a pool sees its shared dependencies at most 30 s
 * late, for one job message and 1 + G requests a half period, whatever the number of pools.
 */
import { formatLabelSelector, type KubeObject, listAll } from "../../kube/index.ts";
import type { Context, JobMessage, Message, SweepMemo, SweepTask } from "../../runtime/index.ts";
import { pagesOf } from "../../runtime/index.ts";
import { ExposureMode, parseSubPool, subPoolResource } from "./api.ts";
import type { OperatorConfig } from "./config.ts";
import { endpointSliceResource, gatewayResource } from "./desired.ts";
import { gatewayReadiness, getOrUndefined } from "./reconcile.ts";

/** The job task's name (the message's `shard.task`). */
export const sharedLookTask = "shared-look";

/** What the shared dependencies said: the proxy gateway, and each Gateway's liveness, by key. */
export interface SharedState {
  proxyGateway: { ready: boolean; message: string };
  gateways: Record<string, string>;
}

/** The job's data: the Gateways pools route through, and what the drift saw of them. */
interface LookData {
  seen: SharedState;
}

/** The Gateway an active Gateway-mode pool routes through, or undefined. */
function gatewayOf(pool: KubeObject, config: OperatorConfig): string | undefined {
  const parsed = parseSubPool(pool);
  if (!parsed.success || parsed.data.spec.suspend || pool.metadata.deletionTimestamp) return undefined;
  const exposure = parsed.data.spec.exposure;
  if (exposure.mode !== ExposureMode.Gateway) return undefined;
  const name = exposure.gateway?.name ?? config.gateway?.name;
  const namespace = exposure.gateway?.namespace ?? config.gateway?.namespace;
  return name && namespace ? `${namespace}/${name}` : undefined;
}

/** What a Gateway says for the routes through it: absent, or its Programmed/Accepted condition. */
function gatewayLiveness(gateway: KubeObject | undefined): string {
  if (!gateway) return "absent";
  const conditions =
    (gateway.status as { conditions?: { type: string; status: string; message?: string }[] } | undefined)
      ?.conditions ?? [];
  const live =
    conditions.find((c) => c.type === "Programmed") ?? conditions.find((c) => c.type === "Accepted");
  return live ? `${live.type}=${live.status}: ${live.message ?? ""}` : "no status";
}

/** Reads the shared dependencies: one list of the proxy gateway's EndpointSlices, one GET per Gateway. */
export async function readSharedState(
  ctx: Context,
  config: OperatorConfig,
  gateways: readonly string[],
  memo?: SweepMemo,
): Promise<SharedState> {
  const state: SharedState = {
    proxyGateway: await proxyGatewayOnce(ctx, memo, config.proxyGateway),
    gateways: {},
  };
  for (const key of gateways) {
    const [ns, name] = key.split("/");
    if (!ns || !name) continue;
    // The drift's read of the same Gateway this sweep, when there was one (same memo key).
    const read = async () => (await getOrUndefined(ctx, gatewayResource, { namespace: ns, name })) ?? null;
    const gateway = memo ? await memo.once(`subpool:gateway:${key}`, read) : await read();
    state.gateways[key] = gatewayLiveness(gateway ?? undefined);
  }
  return state;
}

/**
 * The shared proxy gateway's readiness from its EndpointSlices: one list, shared through `memo`
 * by the drift decision and the shared look of one sweep.
 */
export function proxyGatewayOnce(
  ctx: Context,
  memo: SweepMemo | undefined,
  gateway: { namespace: string; service: string },
): Promise<{ ready: boolean; message: string }> {
  const read = async () =>
    gatewayReadiness(
      await listAll(ctx.kube, endpointSliceResource, {
        namespace: gateway.namespace,
        labelSelector: formatLabelSelector({ "kubernetes.io/service-name": gateway.service }),
      }),
      gateway,
    );
  return memo
    ? memo.once(`subpool:proxy-gateway-slices:${gateway.namespace}/${gateway.service}`, read)
    : read();
}

/**
 * The sweep task: with the drift (once per drift period), it gathers the Gateways the listed pools
 * route through, reads the shared state the drift decided on, and sends the half-period job.
 *
 * Memory: the distinct Gateways (a handful), never the pools.
 */
export function sharedLookSweepTask(config: OperatorConfig, halfPeriodSeconds: number): SweepTask {
  return {
    name: "subpool-shared-look",
    controller: "subpool",
    withDrift: true,
    start(ctx, memo, info) {
      const gateways = new Set<string>();
      let active = 0;
      return {
        async page(pools) {
          for (const pool of pools) {
            if (pool.metadata.deletionTimestamp || (pool.spec as { suspend?: boolean } | undefined)?.suspend)
              continue;
            active++;
            const gateway = gatewayOf(pool, config);
            if (gateway) gateways.add(gateway);
          }
        },
        async finish(): Promise<Record<string, number>> {
          if (active === 0) return { looks: 0 };
          const seen = await readSharedState(ctx, config, [...gateways].sort(), memo);
          const due = (info?.at ?? ctx.clock.now()).getTime() + halfPeriodSeconds * 1000;
          const delay = Math.max(0, Math.round((due - ctx.clock.now().getTime()) / 1000));
          const data: LookData = { seen };
          const message: JobMessage = {
            kind: "job",
            job: { controller: "subpool", task: sharedLookTask, slot: "0", objects: [], data, due },
          };
          await ctx.queue.send([message], delay);
          return { looks: 1, gateways: gateways.size };
        },
      };
    },
  };
}

/**
 * The half-period job: reads the shared state again and, when it differs from what the drift saw,
 * lists the pools (paged) and sends a pass (`drift:shared-look`) to each active pool concerned: all
 * of them when the proxy gateway changed, those routing through a Gateway that changed.
 */
export function sharedLookHandler(config: OperatorConfig) {
  return async (
    ctx: Context,
    _objects: readonly KubeObject[],
    data?: unknown,
  ): Promise<Record<string, number>> => {
    const seen = (data as LookData | undefined)?.seen;
    if (!seen?.proxyGateway) return { changed: 0 };
    const now = await readSharedState(ctx, config, Object.keys(seen.gateways));
    const proxyGatewayChanged =
      now.proxyGateway.ready !== seen.proxyGateway.ready ||
      now.proxyGateway.message !== seen.proxyGateway.message;
    const changedGateways = new Set(
      Object.keys(seen.gateways).filter((key) => now.gateways[key] !== seen.gateways[key]),
    );
    if (!proxyGatewayChanged && changedGateways.size === 0) return { changed: 0 };
    let passes = 0;
    for await (const page of pagesOf(ctx.kube, subPoolResource, { limit: 500 })) {
      const messages: Message[] = [];
      for (const pool of page) {
        if (pool.metadata.deletionTimestamp || (pool.spec as { suspend?: boolean } | undefined)?.suspend)
          continue;
        const gateway = gatewayOf(pool, config);
        if (!proxyGatewayChanged && !(gateway && changedGateways.has(gateway))) continue;
        messages.push({
          request: { controller: "subpool", name: pool.metadata.name ?? "" },
          attempt: 0,
          trigger: { kind: "drift", reason: sharedLookTask },
        });
      }
      if (messages.length > 0) await ctx.queue.send(messages);
      passes += messages.length;
    }
    return { changed: 1, passes };
  };
}
