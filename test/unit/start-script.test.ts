import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { hostNodeArgs, hostProcessEnv } from "../e2e/host.ts";

const startScript = readFileSync(fileURLToPath(new URL("../../scripts/start.sh", import.meta.url)), "utf8");

// The e2e tests and the fleet bench measure the host as `npm start` runs it: same Node options,
// same memory settings.
describe("scripts/start.sh and test/e2e/host.ts", () => {
  it("start the host with the same Node options", () => {
    const exec = startScript.split("\n").filter((l) => l.startsWith("exec node "));
    expect(exec).toEqual([`exec node ${hostNodeArgs.join(" ")}`]);
    expect(hostNodeArgs).toContain("--max-semi-space-size=16");
    expect(hostNodeArgs).toContain("--max-old-space-size=512");
  });

  it("give it the same malloc arenas, unless the environment sets them", () => {
    for (const [name, value] of Object.entries(hostProcessEnv)) {
      expect(startScript).toContain(`export ${name}="\${${name}:-${value}}"`);
    }
    expect(hostProcessEnv).toEqual({ MALLOC_ARENA_MAX: "2" });
  });
});
