import { traceFrom } from "../runtime/index.ts";
import { admissionProblems } from "./admission/index.ts";
import type { Core } from "./build.ts";
import { type FleetGroup, type FleetPageOptions, fleetGroup, groupedFleetPage } from "./fleet/index.ts";
import { createFunctionsApp } from "./http.ts";
import {
  type CloudWatchLogsResult,
  type IntakeBatch,
  intakeCloudWatchLogs,
  mapWithRegistry,
} from "./intake/index.ts";
import type { Kubefn } from "./ports.ts";
import { sealingQueue } from "./trace.ts";

/**
 * The core's part of the fleet page: its cluster's group (read, passes, admission gate) and the
 * page's settings. Built once: every view of the page, this kubefn's own or a fleet's, shares its
 * cached read.
 */
export function createPage(core: Core): { group: FleetGroup; options: FleetPageOptions } {
  const { ctx, ops, settings, admission } = core;
  const primaries = ops.registry.controllers.map((c) => ({ controller: c.name, resource: c.for }));
  const options: FleetPageOptions = {
    access: settings.fleetPage,
    ...(settings.apiToken ? { apiToken: settings.apiToken } : {}),
  };
  const group = fleetGroup(ctx, primaries, core.passes, {
    admission: () => {
      const state = admission.state();
      return state && { ready: state.report.ready, problems: admissionProblems(state.report) };
    },
  });
  return { group, options };
}

/**
 * The core's `fetch`: intake, the crawler API and the operators' routes (createFunctionsApp),
 * and the fleet page at `/` (`page`, its cluster's alone). Each intake batch starts a trace of its
 * own, which its passes continue; so does each send of the operators' own routes.
 */
export function createFetch(core: Core, page: ReturnType<typeof createPage>): Kubefn["fetch"] {
  const { ctx, ops, settings, ports } = core;
  const intakeCtx = {
    ...ctx,
    queue: sealingQueue(ctx.queue, () => traceFrom(undefined).traceparent, core.outgoing),
  };
  const intakeBatch = (): IntakeBatch => {
    const batch = core.hop(ctx, undefined, "intake");
    return {
      log: batch.ctx.log,
      enqueue: (messages) => batch.ctx.queue.send(messages),
      end: ({ source, enqueued, failed }) =>
        batch.end({ result: failed ? "error" : "done", source, enqueued }),
    };
  };
  const app = createFunctionsApp(
    intakeCtx,
    ops,
    ports.intakeCredentials ? { ...settings, credentials: ports.intakeCredentials } : settings,
    intakeBatch,
  );
  app.route("/", groupedFleetPage([page.group], page.options));
  return (request) => app.fetch(request);
}

/** The core's `ingest`: a CloudWatch Logs delivery of audit records, mapped and enqueued. */
export function createIngest(core: Core): Kubefn["ingest"] {
  const { ctx, ops, settings } = core;
  return async (delivery) => {
    const batch = core.hop(ctx, undefined, "intake");
    const source = "cloudwatch-logs";
    let result: CloudWatchLogsResult;
    try {
      result = await intakeCloudWatchLogs(delivery.data, {
        map: mapWithRegistry(batch.ctx, ops.registry, settings.selfUsernames),
        enqueue: (messages) => batch.ctx.queue.send(messages),
        log: batch.ctx.log,
        metrics: ctx.metrics,
        maxBytes: settings.maxBodyBytes,
      });
    } catch (err) {
      batch.end({ result: "error", source });
      throw err;
    }
    batch.ctx.log.info(
      "audit log delivery",
      "acknowledged" in result ? { ...result } : { enqueued: result.enqueued, ...result.counts },
    );
    batch.end({ result: "done", source, enqueued: "acknowledged" in result ? 0 : result.enqueued });
    return result;
  };
}
