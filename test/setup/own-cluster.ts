/**
 * globalSetup of the "own-cluster" project: files that start a devcluster of their own (an API
 * server with an authentication webhook or configuration the shared one does not have) and touch
 * nothing of the shared one. They run one at a time, beside the "integration" project's chain
 * instead of in it. Provides what they need of test/setup/devcluster.ts: the binary's path, and a
 * temporary root for the files' temporary directories, removed at the end.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { tempRootEnv } from "../support/temp-dir.ts";
import "./devcluster.ts"; // the ProvidedContext declaration

const devclusterBin = fileURLToPath(new URL("../../infra/devcluster/bin/devcluster", import.meta.url));

export default function setup(project: TestProject): () => void {
  if (!existsSync(devclusterBin)) {
    throw new Error(`${devclusterBin} is missing: run \`npm run build:devcluster\` first`);
  }
  const tempRoot = mkdtempSync(join(tmpdir(), "kubefn-test-own-"));
  process.env[tempRootEnv] = tempRoot;
  project.provide("devclusterBin", devclusterBin);
  return () => rmSync(tempRoot, { recursive: true, force: true });
}
