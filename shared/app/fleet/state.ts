import type { KubeObject } from "../../kube/index.ts";

/** How a state reads at a glance: settled and well, failing, on its way, or not known yet. */
export type Tone = "good" | "bad" | "busy" | "unknown";

/** One object's state as the fleet page shows it, read from its status alone. */
export interface ObjectState {
  /** `status.phase` when the kind has one, else Ready / NotReady / Unknown from conditions. */
  state: string;
  tone: Tone;
  /** The reason of the condition that explains the state (the Ready condition, or the latest change). */
  reason?: string;
  message?: string;
  /** The latest `lastTransitionTime` of any condition: when the object last changed state. */
  changedAt?: string;
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

// The phases of the primaries kubefn runs, for the kinds that have one.
const goodPhases = new Set(["Ready"]);
const badPhases = new Set(["Failed", "Unhealthy"]);

/**
 * The state of any primary, whatever its kind: `status.phase` when it has one (Pending,
 * Provisioning, Ready, Unhealthy, Deleting, Failed), else its `Ready` condition, else all of its
 * conditions (a kind with one `<Component>Ready` per component: Ready when every one is True).
 *
 * Caveats: status is written by kubefn, but what it quotes may come from the tenant (a provider name
 * echoed in a message): callers must treat every string here as untrusted text.
 */
export function stateOf(object: KubeObject): ObjectState {
  const status = (object as { status?: Record<string, unknown> }).status;
  const conditions = conditionsOf(status?.conditions);
  const changedAt = latest(conditions)?.lastTransitionTime;
  const at = typeof changedAt === "string" && changedAt ? { changedAt } : {};
  const ready = conditions.find((c) => c.type === "Ready");
  const phase = typeof status?.phase === "string" ? status.phase : undefined;
  if (phase !== undefined || object.metadata.deletionTimestamp) {
    const state = object.metadata.deletionTimestamp ? "Deleting" : (phase as string);
    const tone: Tone = goodPhases.has(state) ? "good" : badPhases.has(state) ? "bad" : "busy";
    // A reason naming another condition (Provisioned=False/PermanentError) defers to it.
    const c = ready ?? latest(conditions);
    return { state, tone, ...explained(conditions.find((x) => x.type === c?.reason) ?? c), ...at };
  }
  if (ready) {
    const state = ready.status === "True" ? "Ready" : ready.status === "False" ? "NotReady" : "Unknown";
    return { state, tone: toneOfReady(ready.status), ...explained(ready), ...at };
  }
  if (conditions.length === 0) return { state: "New", tone: "unknown" };
  const notTrue = conditions.find((c) => c.status === "False") ?? conditions.find((c) => c.status !== "True");
  if (!notTrue) return { state: "Ready", tone: "good", ...at };
  const state = notTrue.status === "False" ? "NotReady" : "Unknown";
  const { reason, message } = explained(notTrue);
  return {
    state,
    tone: toneOfReady(notTrue.status),
    reason: reason ? `${notTrue.type}: ${reason}` : notTrue.type,
    ...(message ? { message } : {}),
    ...at,
  };
}

function toneOfReady(status: string): Tone {
  return status === "True" ? "good" : status === "False" ? "busy" : "unknown";
}

function explained(c: Condition | undefined): Pick<ObjectState, "reason" | "message"> {
  if (!c) return {};
  return {
    ...(typeof c.reason === "string" && c.reason ? { reason: c.reason } : {}),
    ...(typeof c.message === "string" && c.message ? { message: c.message } : {}),
  };
}

function latest(conditions: readonly Condition[]): Condition | undefined {
  // Transition times are whole seconds: of two that moved in one second, the one listed later
  // (conditions are appended as they first appear: Healthy after Provisioned) wins.
  let found: Condition | undefined;
  for (const c of conditions) {
    if (!found || (c.lastTransitionTime ?? "") >= (found.lastTransitionTime ?? "")) found = c;
  }
  return found;
}

function conditionsOf(value: unknown): Condition[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (c): c is Condition =>
      typeof c === "object" && c !== null && typeof c.type === "string" && typeof c.status === "string",
  );
}
