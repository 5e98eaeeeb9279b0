/**
 * The CLI as users get it from npm (scripts/release/cli-package.ts): `npm pack`'s tarball run with
 * `npx --package <tarball> kubefn …`, npm offline (its own empty cache, `offline`), so nothing but
 * the tarball is installed and nothing leaves the machine but the CLI's requests to the loopback
 * devcluster: `--version`, and `install --dry-run` reporting the shared cluster's install as
 * unchanged, as the checkout's CLI does (test/integration/cli.test.ts).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installCrdsAndRbac } from "../../functions/node/install.ts";
import { installObjects } from "../../install/index.ts";
import { cliPackage } from "../../scripts/release/cli-package.ts";
import { createKube } from "../../shared/kube/index.ts";
import { createNodeTransport, loadKubeConfig } from "../../shared/kube/node.ts";
import { clusterInfo } from "../setup/cluster.ts";
import { outputOf } from "../support/child-output.ts";
import { type TempDir, tempDir } from "../support/temp-dir.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

let work: TempDir;
let tarball: string;

/** `npx --package <tarball> kubefn …` from an empty directory, npm offline with an empty cache. */
function npx(...args: string[]) {
  return outputOf(
    spawn("npx", ["--yes", "--package", tarball, "kubefn", ...args], {
      cwd: join(work.path, "run"),
      env: {
        PATH: process.env.PATH,
        HOME: work.path,
        KUBECONFIG: clusterInfo().kubeconfig,
        npm_config_offline: "true",
        npm_config_cache: join(work.path, "npm-cache"),
        npm_config_update_notifier: "false",
      },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
}

beforeAll(async () => {
  await installCrdsAndRbac(
    createKube(createNodeTransport(loadKubeConfig({ file: clusterInfo().kubeconfig }))),
  );
  work = tempDir("kubefn-cli-package-");
  tarball = await cliPackage(work.path);
  const { mkdirSync } = await import("node:fs");
  mkdirSync(join(work.path, "run"));
}, 120_000);

afterAll(() => {
  work?.remove();
});

describe("the CLI's npm package", () => {
  it("declares its bin and files and no dependencies: everything is in the bundle", () => {
    const pkg = JSON.parse(readFileSync(join(work.path, "npm/kubefn/package.json"), "utf8")) as Record<
      string,
      unknown
    >;
    expect(pkg).toMatchObject({
      name: "kubefn",
      version,
      bin: { kubefn: "bin/kubefn.mjs" },
      files: ["bin", "infra"],
    });
    expect(pkg).not.toHaveProperty("dependencies");
    expect(pkg).not.toHaveProperty("private");
    expect(tarball.endsWith(`kubefn-${version}.tgz`)).toBe(true);
  });

  it("runs with npx from the tarball alone: --version", async () => {
    const r = await npx("--version");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      `kubefn ${version}\nCRDs: crawl.kubefn.dev/v1alpha1 subrelay.example.com/v1alpha1 unbounded-cloud.io/v1alpha3\n`,
    );
  }, 60_000);

  it("install --dry-run: the cluster side from the package's own manifests, unchanged, nothing written", async () => {
    const r = await npx("install", "--dry-run");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toContain("unchanged CustomResourceDefinition proxies.crawl.kubefn.dev");
    expect(lines).toContain(
      `would be 0 created, 0 changed, ${installObjects(root, version).length} unchanged (dry run: nothing was written)`,
    );
  }, 60_000);
});
