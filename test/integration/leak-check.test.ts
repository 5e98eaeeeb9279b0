/**
 * The leak check (test/setup/leak-check.ts) fails the file that leaks, naming what leaked, and
 * ends it: vitest runs, in this process, the fixture files of test/fixtures/leaks/ with the check
 * as their setup file against this run's devcluster — one leaves a process and an orphaned
 * grandchild running, one a Namespace and a Proxy a finalizer holds, one releases everything
 * (a Namespace still terminating at its end is given time to go).
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import type { TestModule } from "vitest/node";
import { startVitest } from "vitest/node";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import {
  createFetchTransport,
  createKube,
  isNotFound,
  type Kube,
  Resources,
} from "../../shared/kube/index.ts";
import { clusterInfo, eventually } from "../setup/cluster.ts";
import { readProcesses } from "../support/leaks.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const namespace = `leak-fixture-${randomBytes(3).toString("hex")}`;

let kube: Kube;
let modules: Map<string, TestModule>;

beforeAll(async () => {
  const { httpProxy, adminToken } = clusterInfo();
  kube = createKube(createFetchTransport({ server: httpProxy, token: adminToken }));
  await installCrdsAndRbac(kube);
  process.env.KUBEFN_LEAK_FIXTURE_NS = namespace;
  const exitCode = process.exitCode;
  const vitest = await startVitest("test", [], {
    config: false,
    root,
    include: ["test/fixtures/leaks/*.fixture.ts"],
    setupFiles: ["test/setup/leak-check.ts"],
    provide: { httpProxy, adminToken },
    fileParallelism: false,
    watch: false,
    reporters: [{}],
  });
  try {
    modules = new Map(
      vitest.state.getTestModules().map((m) => [m.moduleId.slice(m.moduleId.lastIndexOf("/") + 1), m]),
    );
  } finally {
    await vitest.close();
    process.exitCode = exitCode;
    delete process.env.KUBEFN_LEAK_FIXTURE_NS;
  }
}, 240_000);

/** The errors vitest reported for the fixture file (the check's failure is one of the file's). */
const fileErrors = (file: string) =>
  (modules.get(file)?.errors() ?? []).map((e) => e.message ?? String(e)).join("\n");

describe("the leak check", () => {
  it("fails a file that leaves a process running, names it and its orphaned grandchild, and ends both", () => {
    expect(modules.get("leaks-process.fixture.ts")?.state()).toBe("failed");
    const errors = fileErrors("leaks-process.fixture.ts");
    expect(errors).toMatch(/process \d+ still running: sleep 301/);
    expect(errors).toMatch(/process \d+ still running: sleep 302/);
    const left = readProcesses().filter((p) => /^sleep 30[12]$/.test(p.command) && p.mark !== undefined);
    expect(left).toEqual([]);
  });

  it("fails a file that leaves a Namespace and a held Proxy, names them, and removes them", async () => {
    expect(modules.get("leaks-objects.fixture.ts")?.state()).toBe("failed");
    const errors = fileErrors("leaks-objects.fixture.ts");
    expect(errors).toContain(`Namespace ${namespace} left in the cluster`);
    expect(errors).toContain(`Proxy ${namespace}/held left in the cluster`);
    await eventually(
      () =>
        kube.get(Resources.Namespace, { name: namespace }).then(
          () => undefined,
          (err: unknown) => (isNotFound(err) ? true : undefined),
        ),
      { timeoutMs: 60_000, what: `namespace ${namespace} gone` },
    );
  });

  it("passes a file that ends its process and deletes its Namespace", () => {
    expect(fileErrors("clean.fixture.ts")).toBe("");
    expect(modules.get("clean.fixture.ts")?.state()).toBe("passed");
  });
});
