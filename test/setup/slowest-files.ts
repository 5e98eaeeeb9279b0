/**
 * A reporter that ends the run with the slowest test files of the integration project (which runs
 * one file at a time in each lane, so their durations add up to most of a lane's time), and their sum:
 * the figures docs/performance.md's "npm test" row is kept from, and the first place to look when
 * the suite grows past its 30-minute goal.
 */
import type { Reporter, TestModule } from "vitest/node";

const SHOWN = 15;

export default class SlowestFiles implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const timed = modules
      .filter((m) => m.project.name === "integration")
      .map((m) => ({ file: m.moduleId.replace(`${process.cwd()}/`, ""), ms: fileMs(m), tests: testsMs(m) }))
      .sort((a, b) => b.ms - a.ms);
    if (timed.length === 0) return;
    const total = timed.reduce((sum, t) => sum + t.ms, 0);
    const lane = process.env.KUBEFN_TEST_LANE;
    const lines = timed
      .slice(0, SHOWN)
      .map(
        (t) =>
          `  ${(t.ms / 1000).toFixed(0).padStart(5)} s  ${t.file} (tests ${(t.tests / 1000).toFixed(0)} s; the rest its hooks and loading)`,
      );
    process.stdout.write(
      `\nslowest integration files${lane ? ` of lane ${lane}` : ""} (${timed.length} files, ${(total / 1000).toFixed(0)} s in all, one at a time):\n${lines.join("\n")}\n`,
    );
  }
}

function fileMs(m: TestModule): number {
  const d = m.diagnostic();
  return d.duration + d.collectDuration + d.setupDuration + d.prepareDuration;
}

/** The file's tests alone, without its beforeAll/afterAll hooks. */
function testsMs(m: TestModule): number {
  let ms = 0;
  for (const t of m.children.allTests()) ms += t.diagnostic()?.duration ?? 0;
  return ms;
}
