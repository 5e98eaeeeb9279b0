/**
 * The context a test gives passes it runs itself against the devcluster: `kube`, a queue that
 * drops what is sent (the test runs each follow-up it wants), the wall clock, no log lines and
 * no metrics — each overridable (a frozen clock, errors on the console).
 */
import type { Context, Kube } from "../../shared/runtime/index.ts";

export const consoleErrors: Context["log"] = {
  info: () => {},
  warn: () => {},
  error: (msg, fields) => console.error(msg, fields),
};

export function passContext(kube: Kube, overrides: Partial<Context> = {}): Context {
  return {
    kube,
    queue: { send: async () => {} },
    clock: { now: () => new Date() },
    log: { info: () => {}, warn: () => {}, error: () => {} },
    metrics: { count: () => {}, observe: () => {}, gauge: () => {} },
    random: Math.random,
    ...overrides,
  };
}
