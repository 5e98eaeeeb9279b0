import { defineConfig } from "vitest/config";
import LaneSequencer from "./test/setup/lanes.ts";

export default defineConfig({
  test: {
    // The default report, then the slowest integration files (the suite's time is mostly theirs).
    reporters: ["default", "./test/setup/slowest-files.ts"],
    // `--shard=i/2` is a lane of npm test (scripts/test.sh): see test/setup/lanes.ts.
    sequence: { sequencer: LaneSequencer },
    projects: [
      {
        test: {
          name: "unit",
          include: [
            "shared/**/*.test.ts",
            "functions/**/*.test.ts",
            "infra/relay/**/*.test.ts",
            "test/unit/**/*.test.ts",
          ],
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts", "test/e2e/**/*.test.ts", "test/chaos/**/*.test.ts"],
          globalSetup: ["test/setup/devcluster.ts"],
          // Fails a file that leaves a process running or an object in the cluster (names what).
          setupFiles: ["test/setup/leak-check.ts"],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // One control plane per run; files share it, so keep them from stepping on each other.
          fileParallelism: false,
        },
      },
    ],
  },
});
