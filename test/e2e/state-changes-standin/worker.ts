/**
 * kubefn's Worker (functions/cloudflare/worker.ts, unchanged) beside a stand-in for the user's
 * consumer of the STATE_CHANGES queue: each state change it receives is logged as one JSON line
 * (`msg: "state change received"`), for test/e2e/worker-state-changes.test.ts to read through the
 * harness's logs. Every other batch is kubefn's own.
 */
import type { ExecutionContext, MessageBatch } from "@cloudflare/workers-types/index.ts";
import type { WorkerEnv } from "../../../functions/cloudflare/index.ts";
import kubefn from "../../../functions/cloudflare/worker.ts";

export default {
  fetch: kubefn.fetch,
  scheduled: kubefn.scheduled,
  async queue(batch: MessageBatch<unknown>, env: WorkerEnv, exec: ExecutionContext): Promise<void> {
    if (batch.queue !== "kubefn-state-changes") return kubefn.queue(batch, env, exec);
    for (const message of batch.messages) {
      console.log(JSON.stringify({ msg: "state change received", body: message.body }));
      message.ack();
    }
  },
};
