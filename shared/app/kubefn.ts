import { buildCore } from "./build.ts";
import { createConsume } from "./consume.ts";
import { createDeadLetters } from "./dead-letters.ts";
import type { Operators } from "./operators.ts";
import type { Kubefn, KubefnPorts } from "./ports.ts";
import type { KubefnSettings } from "./settings.ts";
import { createFetch, createIngest, createPage } from "./surface.ts";
import { createSweep } from "./sweep.ts";

export { jobLine, passLine } from "./consume.ts";
export type { Delivery, Ingest, Kubefn, KubefnPorts, Verdict } from "./ports.ts";
export { sweepLine } from "./sweep.ts";

/**
 * The one seam between kubefn and a platform, as Hono's `app.fetch` is: settings and ports in,
 * `{ fetch, consume, sweep, ingest, deadLetters }` out. An adapter parses its environment into
 * {@link KubefnSettings}, binds its ports, and maps its event shapes onto the four calls.
 *
 * @example
 * const kubefn = createKubefn(settings, { kube, queue, prober, log, metrics });
 * export default { fetch: (req) => kubefn.fetch(req) };
 *
 * `operators` replaces the operators built from the settings (tests run a registry of their own).
 */
export function createKubefn(settings: KubefnSettings, ports: KubefnPorts, operators?: Operators): Kubefn {
  const core = buildCore(settings, ports, operators);
  const page = createPage(core);
  return {
    controllers: core.ops.registry.controllers.map((c) => c.name),
    fetch: createFetch(core, page),
    page,
    consume: createConsume(core),
    sweep: createSweep(core),
    ingest: createIngest(core),
    deadLetters: createDeadLetters(core),
  };
}
