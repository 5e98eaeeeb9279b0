import { ReconcileError } from "../../kube/index.ts";
import {
  type ControllerDefinition,
  createRegistry,
  type DriftDeclaration,
  failed,
  MAX_RESYNC_SECONDS,
  MIN_RESYNC_SECONDS,
  RegistryError,
} from "../definition/index.ts";

/** Ready's reason on the primaries of a controller whose definition was refused at start. */
export const OPERATOR_NOT_STARTED = "OperatorNotStarted";

/** A controller {@link startable} could not start, and why (each problem a line). */
export interface RefusedController {
  controller: string;
  problems: readonly string[];
}

/**
 * Builds one controller and validates it alone (as {@link createRegistry} would), so that a
 * setting that makes one definition invalid stops that operator only: its definition is replaced
 * by `stopped(problems)` (by default {@link stoppedController}), and the refusal is reported
 * through `refused`. Problems between controllers (two claiming one kind) are still the
 * registry's to refuse.
 *
 * @example
 * const subPool = startable("subpool", () => subPoolController(deps), refused);
 */
export function startable(
  name: string,
  build: () => ControllerDefinition,
  refused: RefusedController[],
  stopped?: (problems: readonly string[]) => ControllerDefinition,
): ControllerDefinition {
  let def: ControllerDefinition | undefined;
  let problems: readonly string[];
  try {
    def = build();
    createRegistry([def]);
    return def;
  } catch (err) {
    if (err instanceof RegistryError) problems = err.problems;
    else problems = [err instanceof Error ? err.message : String(err)];
  }
  refused.push({ controller: name, problems });
  if (stopped) {
    const fallback = stopped(problems);
    try {
      createRegistry([fallback]);
      return fallback;
    } catch {}
  }
  if (!def) throw new Error(`controller "${name}" could not be built: ${problems.join("; ")}`);
  return stoppedController(def, problems);
}

/**
 * The stand-in of a controller whose definition was refused: same name, kind and conditions; every
 * pass writes `Ready=False/OperatorNotStarted` (stalled) naming the problems and changes nothing
 * else, and the drift sends a pass only to a primary that does not say so yet.
 *
 * Caveats: a primary being deleted keeps its finalizer until the operator starts again: the
 * stand-in declares no finalizer (`ControllerDefinition.finalizer`), so the runtime neither adds
 * nor cleans up nor removes one, and nothing the operator created is released while kubefn cannot
 * reconcile it.
 */
export function stoppedController(
  def: ControllerDefinition,
  problems: readonly string[],
): ControllerDefinition {
  const message = `the ${def.name} operator did not start (${problems.join("; ")}); fix its settings and restart`;
  const drift: DriftDeclaration = {
    decide: ({ primary }) => {
      const conditions = (primary.status as { conditions?: { type: string; reason?: string }[] } | undefined)
        ?.conditions;
      const ready = conditions?.find((c) => c.type === "Ready");
      return ready?.reason === OPERATOR_NOT_STARTED ? undefined : "operator-not-started";
    },
  };
  const resync = Number.isInteger(def.resyncSeconds)
    ? Math.min(MAX_RESYNC_SECONDS, Math.max(MIN_RESYNC_SECONDS, def.resyncSeconds))
    : MIN_RESYNC_SECONDS;
  return {
    name: def.name,
    for: def.for,
    conditionTypes: def.conditionTypes,
    resyncSeconds: resync,
    drift,
    ...(def.observedGeneration === undefined ? {} : { observedGeneration: def.observedGeneration }),
    readiness: () => ({ status: "False", reason: OPERATOR_NOT_STARTED, message, progress: "stalled" }),
    reconcile: async () => failed(ReconcileError.permanent(OPERATOR_NOT_STARTED, message)),
  };
}
