/**
 * How `npm test` splits the suite into two lanes that run side by side (scripts/test.sh:
 * `vitest run --shard=1/2` and `--shard=2/2`), each with a devcluster of its own, so that the
 * integration files — one at a time within a lane, as they share its control plane — take about
 * half the time. Most of their time is waiting (sweeps, follow-ups, tokens that must expire): one
 * lane keeps a 2-core machine at a load of about 1.
 *
 * - Every file that starts the Worker in workerd (it names `createTestHarness` or imports from
 *   wrangler) goes to the last lane: wrangler
 *   builds into `dist/worker-src` and keeps its state in `.wrangler/` of the checkout, which two
 *   harnesses starting at once would both write.
 * - The other integration files go, slowest first, to the lane with less time so far
 *   ({@link KNOWN_SECONDS}; a file not listed counts {@link DEFAULT_SECONDS}).
 * - Unit files alternate between the lanes.
 *
 * Caveats: the figures only balance the lanes; a stale one makes one lane longer, never a file
 * skipped or run twice (every file lands in exactly one lane: test/unit/lanes.test.ts).
 */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Seconds each integration file of 18 s or more took in a full `npm test` (the ✓ line's duration,
 * hooks included, plus ~3 s of loading), so lanes balance on what files really take.
 */
export const KNOWN_SECONDS: Readonly<Record<string, number>> = {
  "test/integration/worker-fleet.test.ts": 220,
  "test/chaos/worker.test.ts": 183,
  "test/integration/lambda-fleet.test.ts": 172,
  "test/e2e/deploy-node-page.test.ts": 142,
  "test/e2e/worker.test.ts": 126,
  "test/chaos/node-host.test.ts": 107,
  "test/chaos/kill-at-write.test.ts": 105,
  "test/e2e/deploy-aws-page.test.ts": 101,
  "test/e2e/node-host-identity.test.ts": 90,
  "test/e2e/examples.test.ts": 88,
  "test/e2e/deploy-cloudflare-page.test.ts": 86,
  "test/e2e/node-host.test.ts": 86,
  "test/integration/worker-oidc-issuer.test.ts": 86,
  "test/integration/oidc-issuer.test.ts": 82,
  "test/e2e/health-steady.test.ts": 81,
  "test/integration/sweep-drift.test.ts": 76,
  "test/integration/cli.test.ts": 73,
  "test/integration/cloud-identity-tokens.test.ts": 73,
  "test/integration/uninstall.test.ts": 66,
  "test/chaos/operators.test.ts": 61,
  "test/integration/fleet.test.ts": 59,
  "test/e2e/proxy.test.ts": 59,
  "test/integration/fleet-discovery.test.ts": 57,
  "test/e2e/steady-state.test.ts": 47,
  "test/e2e/replicas.test.ts": 42,
  "test/integration/readiness-events.test.ts": 42,
  "test/integration/security-stolen-status.test.ts": 39,
  "test/integration/fleet-visible.test.ts": 36,
  "test/e2e/gce-proxy.test.ts": 33,
  "test/integration/subpool.test.ts": 32,
  "test/integration/leak-check.test.ts": 32,
  "test/integration/chart.test.ts": 29,
  "test/integration/security-forged-bodies.test.ts": 28,
  "test/integration/admission-gate.test.ts": 28,
  "test/e2e/audit-exports.test.ts": 26,
  "test/e2e/worker-tunnel.test.ts": 26,
  "test/integration/security-rbac.test.ts": 24,
  "test/integration/subpool-converge.test.ts": 24,
  "test/e2e/traces.test.ts": 24,
  "test/e2e/fleet-page.test.ts": 22,
  "test/integration/devcluster-controllers.test.ts": 22,
};
export const DEFAULT_SECONDS = 12;

/** A file to place: its path from the root, its project, and whether it starts workerd. */
export interface LaneFile {
  path: string;
  project: string;
  workerd: boolean;
}

/** The lane (0-based, of `count`) of every file, by the rules above. */
export function assignLanes(files: readonly LaneFile[], count: number): Map<string, number> {
  const lanes = new Map<string, number>();
  const load = Array.from({ length: count }, () => 0);
  const key = (f: LaneFile) => `${f.project}:${f.path}`;
  const seconds = (f: LaneFile) => KNOWN_SECONDS[f.path] ?? DEFAULT_SECONDS;
  const place = (f: LaneFile, lane: number) => {
    lanes.set(key(f), lane);
    if (f.project !== "unit") load[lane]! += seconds(f);
  };
  const sorted = [...files].sort((a, b) => seconds(b) - seconds(a) || a.path.localeCompare(b.path));
  for (const f of sorted) if (f.workerd) place(f, count - 1);
  let unit = 0;
  for (const f of sorted) {
    if (f.workerd) continue;
    if (f.project === "unit") place(f, unit++ % count);
    else place(f, load.indexOf(Math.min(...load)));
  }
  return lanes;
}

/** What a file that starts the Worker in workerd says: the harness, or a type from wrangler. */
const startsWorkerd = /createTestHarness|from "wrangler"/;

/** The vitest sequencer that applies {@link assignLanes} to `--shard=i/n`. */
export default class LaneSequencer extends BaseSequencer {
  override async shard(specs: TestSpecification[]): Promise<TestSpecification[]> {
    const { index, count } = this.ctx.config.shard!;
    const root = this.ctx.config.root;
    const files = specs.map((s) => ({
      path: relative(root, s.moduleId),
      project: s.project.name,
      workerd: startsWorkerd.test(readFileSync(s.moduleId, "utf8")),
    }));
    const lanes = assignLanes(files, count);
    return specs.filter((_, i) => lanes.get(`${files[i]!.project}:${files[i]!.path}`) === index - 1);
  }
}
