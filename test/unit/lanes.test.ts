import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { assignLanes, DEFAULT_SECONDS, KNOWN_SECONDS, type LaneFile } from "../setup/lanes.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** The integration project's files as vitest.config.ts includes them. */
function integrationFiles(): LaneFile[] {
  const out: LaneFile[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".test.ts"))
        out.push({
          path: relative(root, path),
          project: "integration",
          workerd: /createTestHarness|from "wrangler"/.test(readFileSync(path, "utf8")),
        });
    }
  };
  for (const dir of ["test/integration", "test/e2e", "test/chaos"]) walk(join(root, dir));
  return out;
}

describe("the two lanes of npm test", () => {
  const files = [
    ...integrationFiles(),
    { path: "shared/a.test.ts", project: "unit", workerd: false },
    { path: "shared/b.test.ts", project: "unit", workerd: false },
    { path: "functions/cloudflare/fleet-page.test.ts", project: "unit", workerd: true },
  ];
  const lanes = assignLanes(files, 2);

  it("puts every file in exactly one lane", () => {
    expect(lanes.size).toBe(files.length);
    for (const lane of lanes.values()) expect([0, 1]).toContain(lane);
  });

  it("puts every file that starts workerd in the last lane, whatever its project", () => {
    const workerd = files.filter((f) => f.workerd);
    expect(workerd.map((f) => f.path)).toEqual(
      expect.arrayContaining(["test/chaos/worker.test.ts", "test/e2e/worker.test.ts"]),
    );
    for (const f of workerd) expect(lanes.get(`${f.project}:${f.path}`)).toBe(1);
  });

  it("gives the lanes integration time within the slowest file of each other", () => {
    const time = [0, 0];
    for (const f of files.filter((f) => f.project === "integration"))
      time[lanes.get(`integration:${f.path}`)!]! += KNOWN_SECONDS[f.path] ?? DEFAULT_SECONDS;
    expect(Math.abs(time[0]! - time[1]!)).toBeLessThanOrEqual(Math.max(...Object.values(KNOWN_SECONDS)));
  });

  it("names only files that exist in its table of seconds", () => {
    const paths = new Set(files.map((f) => f.path));
    for (const path of Object.keys(KNOWN_SECONDS)) expect(paths).toContain(path);
  });
});
