/**
 * The intake app over a fake Kube, as the intake unit tests drive it: the three operators'
 * registry, kubefn's own identity, an audit token and a relay secret, and the messages it enqueued.
 */
import { createIntakeApp, mapWithRegistry } from "../../shared/app/intake/index.ts";
import { createRegistry, type PassMessage } from "../../shared/runtime/index.ts";
import { proxyController, siteController, subPoolController } from "../unit/runtime/controllers.ts";
import { FakeKube, fakeContext } from "./fake-kube.ts";

export const AUDIT_TOKEN = "audit-token-0123456789abcdef";
export const RELAY_SECRET = "relay-secret-0123456789abcdef";

export function intakeUnderTest(now: Date, { maxBodyBytes = 64 * 1024, kube = new FakeKube() } = {}) {
  const registry = createRegistry([proxyController(), subPoolController(), siteController()]);
  const { ctx, recorded } = fakeContext(kube, { now });
  const enqueued: PassMessage[] = [];
  const app = createIntakeApp({
    auditToken: AUDIT_TOKEN,
    relaySecret: RELAY_SECRET,
    maxBodyBytes,
    replayWindowSeconds: 300,
    clock: ctx.clock,
    log: ctx.log,
    metrics: ctx.metrics,
    map: mapWithRegistry(ctx, registry, ["system:serviceaccount:kubefn-system:kubefn"]),
    enqueue: async (messages) => {
      enqueued.push(...messages);
    },
  });
  return { app, enqueued, kube, recorded };
}

/** POSTs `body` to the app's `/v1/events` as JSON with `headers`. */
export const postEvents = (
  app: ReturnType<typeof intakeUnderTest>["app"],
  body: string,
  headers: Record<string, string>,
) =>
  app.request("/v1/events", {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
