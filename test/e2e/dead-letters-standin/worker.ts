/**
 * kubefn's Worker (functions/cloudflare/worker.ts, unchanged) with a stand-in for its Analytics
 * Engine dataset that logs each data point it is given as one JSON line (`msg: "data point"`), for
 * test/e2e/worker-dead-letters.test.ts to read through the harness's logs (the local binding
 * discards them).
 */
import type {
  AnalyticsEngineDataPoint,
  ExecutionContext,
  MessageBatch,
  ScheduledController,
} from "@cloudflare/workers-types/index.ts";
import type { WorkerEnv } from "../../../functions/cloudflare/index.ts";
import kubefn from "../../../functions/cloudflare/worker.ts";

// One stand-in env per env, as the Worker builds its parts once per env.
const standIns = new WeakMap<object, WorkerEnv>();

function standInFor(env: WorkerEnv): WorkerEnv {
  const known = standIns.get(env);
  if (known) return known;
  const standIn: WorkerEnv = {
    ...env,
    KUBEFN_METRICS: {
      writeDataPoint(point?: AnalyticsEngineDataPoint) {
        console.log(JSON.stringify({ msg: "data point", point }));
      },
    },
  };
  standIns.set(env, standIn);
  return standIn;
}

export default {
  fetch: (request: Request, env: WorkerEnv, exec: ExecutionContext) =>
    kubefn.fetch(request, standInFor(env), exec),
  queue: (batch: MessageBatch<unknown>, env: WorkerEnv, exec: ExecutionContext) =>
    kubefn.queue(batch, standInFor(env), exec),
  scheduled: (controller: ScheduledController, env: WorkerEnv, exec: ExecutionContext) =>
    kubefn.scheduled(controller, standInFor(env), exec),
};
