/**
 * kubefn's Worker (functions/cloudflare/worker.ts, unchanged) with a counting stand-in for its
 * Analytics Engine dataset: the local binding discards what it is given, so this one keeps the
 * points each invocation writes and, like the platform, refuses the 251st. When an invocation's
 * work (its `waitUntil` promises included) is done, it logs one line with the points it accepted
 * and how many it refused, for test/e2e/worker-metrics.test.ts to read through the harness's logs.
 *
 * Caveats: one isolate may run invocations at once; each line carries the points written since
 * the previous line, which is one invocation's while they come one after another.
 */
import type {
  AnalyticsEngineDataPoint,
  ExecutionContext,
  MessageBatch,
  ScheduledController,
} from "@cloudflare/workers-types/index.ts";
import type { WorkerEnv } from "../../../functions/cloudflare/index.ts";
import kubefn from "../../../functions/cloudflare/worker.ts";

/** Data points Workers Analytics Engine accepts per invocation. */
const PLATFORM_LIMIT = 250;

interface StandIn {
  env: WorkerEnv;
  points: AnalyticsEngineDataPoint[];
  refused: number;
}

// One stand-in per env, as the Worker keeps one registry per env.
const standIns = new WeakMap<object, StandIn>();

function standInFor(env: WorkerEnv): StandIn {
  const known = standIns.get(env);
  if (known) return known;
  const standIn: StandIn = { env, points: [], refused: 0 };
  standIn.env = {
    ...env,
    KUBEFN_METRICS: {
      writeDataPoint(point) {
        if (standIn.points.length >= PLATFORM_LIMIT) {
          standIn.refused++;
          throw new Error(`writeDataPoint(): over ${PLATFORM_LIMIT} data points in one invocation`);
        }
        standIn.points.push(point ?? {});
      },
    },
  };
  standIns.set(env, standIn);
  return standIn;
}

/** Runs one invocation of the Worker on the stand-in's env, then logs what it wrote. */
async function invocation<T>(
  handler: string,
  env: WorkerEnv,
  exec: ExecutionContext,
  run: (env: WorkerEnv, exec: ExecutionContext) => T | Promise<T>,
): Promise<T> {
  const standIn = standInFor(env);
  const waits: Promise<unknown>[] = [];
  const inner = {
    waitUntil(promise: Promise<unknown>) {
      waits.push(promise);
      exec.waitUntil(promise);
    },
    passThroughOnException: () => exec.passThroughOnException(),
  } as unknown as ExecutionContext;
  try {
    return await run(standIn.env, inner);
  } finally {
    for (let settled = 0; settled < waits.length; settled = waits.length) {
      await Promise.allSettled(waits.slice(settled));
    }
    const points = standIn.points.splice(0);
    const refused = standIn.refused;
    standIn.refused = 0;
    console.log(JSON.stringify({ msg: "analytics engine stand-in", handler, refused, points }));
  }
}

export default {
  fetch: (request: Request, env: WorkerEnv, exec: ExecutionContext) =>
    invocation("fetch", env, exec, (e, x) => kubefn.fetch(request, e, x)),
  queue: (batch: MessageBatch<unknown>, env: WorkerEnv, exec: ExecutionContext) =>
    invocation("queue", env, exec, (e, x) => kubefn.queue(batch, e, x)),
  scheduled(controller: ScheduledController, env: WorkerEnv, exec: ExecutionContext) {
    exec.waitUntil(invocation("scheduled", env, exec, (e, x) => kubefn.scheduled(controller, e, x)));
  },
};
