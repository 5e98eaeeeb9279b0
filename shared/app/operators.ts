import { Hono } from "hono/tiny";
import {
  type AnyOperator,
  operators as kubefnOperators,
  type ManifestDirectory,
  type OperatorOptions,
  type OperatorParts,
} from "../controllers/index.ts";
import type { Context, SweepTask } from "../runtime/index.ts";
import { createRegistry, type RefusedController, type Registry, startable } from "../runtime/index.ts";

export type { ManifestDirectory, ManifestOption, OperatorOptions } from "../controllers/index.ts";

/** The directories of manifests the operators of `list` may be given (Node host only). */
export function manifestDirectoriesOf(
  list: readonly AnyOperator[] = kubefnOperators,
): readonly ManifestDirectory[] {
  return list.flatMap((o) => o.manifestDirectories ?? []);
}

/** What every platform runs: the registry, the sweep's periodic tasks, and extra HTTP routes. */
export interface Operators {
  registry: Registry;
  sweepTasks: SweepTask[];
  /** Routes mounted beside the intake (the operators' own, e.g. the crawler API). */
  routes?: (ctx: Context) => Hono;
  /**
   * Operators whose definition a setting made invalid: each runs as a stand-in that says so on its
   * primaries' Ready, and the others run on (see {@link startable}).
   */
  refused?: readonly RefusedController[];
}

/**
 * The operators of `list` (kubefn's own, shared/controllers `operators`, by default), assembled
 * once per platform instance: each builds its parts from its own settings (`opts.settings` by its
 * name) and the platform's options. Nothing here is read from the environment.
 *
 * @example
 * createOperators({ prober, sweepPeriodSeconds: 60 }, [...operators, widgetOperator]);
 */
export function createOperators(
  opts: OperatorOptions,
  list: readonly AnyOperator[] = kubefnOperators,
): Operators {
  // Each operator is built and validated alone: a setting that makes one definition invalid stops
  // that operator only, with a condition on its primaries, never another's start.
  const refused: RefusedController[] = [];
  const parts: OperatorParts[] = list.map((operator) => operator.build(opts.settings?.[operator.name], opts));
  const registry = createRegistry(
    list.map((operator, i) => startable(operator.name, parts[i]!.controller, refused, parts[i]!.stopped)),
  );
  const routes = parts.flatMap((p) => (p.routes ? [p.routes] : []));
  return {
    registry,
    sweepTasks: parts.flatMap((p) => p.sweepTasks ?? []),
    ...(routes.length > 0 ? { routes: mountAll(routes) } : {}),
    ...(refused.length > 0 ? { refused } : {}),
  };
}

function mountAll(routes: readonly ((ctx: Context) => Hono)[]): (ctx: Context) => Hono {
  if (routes.length === 1) return routes[0]!;
  return (ctx) => {
    const app = new Hono();
    for (const r of routes) app.route("/", r(ctx));
    return app;
  };
}
