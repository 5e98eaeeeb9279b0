import { Hono } from "hono/tiny";
import type { Context } from "../shared/runtime/index.ts";
import { createIntakeApp, mapWithRegistry } from "./intake/index.ts";
import type { Operators } from "./operators.ts";

/** What the HTTP surface needs beyond the context: intake credentials and limits. */
export interface HttpSettings {
  auditToken?: string;
  relaySecret?: string;
  maxBodyBytes: number;
  replayWindowSeconds: number;
  /** Writes by these identities are dropped at intake. */
  selfUsernames: readonly string[];
}

/**
 * The functions' HTTP surface, the same on every platform: the intake (`POST /v1/events`,
 * `GET /healthz`) plus the operators' own routes (the crawler API). Enqueues through `ctx.queue`.
 *
 * @example
 * const app = createFunctionsApp(ctx, createOperators({ ... }), settings);
 * export default { fetch: app.fetch };
 */
export function createFunctionsApp(ctx: Context, operators: Operators, settings: HttpSettings): Hono {
  const app = new Hono();
  app.route(
    "/",
    createIntakeApp({
      ...(settings.auditToken ? { auditToken: settings.auditToken } : {}),
      ...(settings.relaySecret ? { relaySecret: settings.relaySecret } : {}),
      maxBodyBytes: settings.maxBodyBytes,
      replayWindowSeconds: settings.replayWindowSeconds,
      clock: ctx.clock,
      log: ctx.log,
      metrics: ctx.metrics,
      map: mapWithRegistry(ctx, operators.registry, settings.selfUsernames),
      enqueue: (messages) => ctx.queue.send(messages),
    }),
  );
  if (operators.routes) app.route("/", operators.routes(ctx));
  return app;
}
