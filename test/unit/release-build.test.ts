/**
 * `npm run release` end to end, into a temporary directory: every artifact is there, named by
 * package.json's version, checksummed, and usable as shipped (the chart's CRDs are files, not
 * links; the Lambda zip holds the bundle the template points at; the Worker deploys from its own
 * wrangler.toml without a build).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { hostObjects, installObjects, relayObjects } from "../../install/index.ts";
import { release } from "../../scripts/release.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
let out: string;
let written: string[];

beforeAll(async () => {
  out = mkdtempSync(join(tmpdir(), "kubefn-release-"));
  written = await release({ out });
}, 600_000);

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

describe("npm run release", () => {
  it("writes every artifact, named by the version", () => {
    expect(written).toEqual(
      expect.arrayContaining([
        "install.yaml",
        "host.yaml",
        "relay.yaml",
        "crds.yaml",
        `kubefn-${version}.tgz`,
        `aws/kubefn-aws-${version}.zip`,
        "aws/template.yaml",
        "cloudflare/worker.js",
        "cloudflare/wrangler.toml",
        "SHA256SUMS",
      ]),
    );
  });

  it("checksums each of them", () => {
    const sums = readFileSync(join(out, "SHA256SUMS"), "utf8").trim().split("\n");
    expect(sums.map((l) => l.split("  ")[1])).toEqual(written.filter((f) => f !== "SHA256SUMS"));
    for (const line of sums) {
      const [sum, file] = line.split("  ") as [string, string];
      expect(
        createHash("sha256")
          .update(readFileSync(join(out, file)))
          .digest("hex"),
        file,
      ).toBe(sum);
    }
  });

  it("ships install.yaml as built from infra/, host.yaml and relay.yaml apart, and crds.yaml with its CRDs", () => {
    const objects = installObjects(root, version);
    const docs = (file: string) =>
      parseAllDocuments(readFileSync(join(out, file), "utf8")).map((d) => d.toJSON());
    expect(docs("install.yaml")).toEqual(objects);
    expect(docs("host.yaml")).toEqual(hostObjects(root, version));
    expect(docs("relay.yaml")).toEqual(relayObjects(root, version));
    expect(docs("crds.yaml")).toEqual(objects.filter((o) => o.kind === "CustomResourceDefinition"));
  });

  it("packages the chart with its CRDs and linked files as files, at the version", async () => {
    const { stdout } = await run("tar", ["tzvf", join(out, `kubefn-${version}.tgz`)]);
    expect(stdout).not.toMatch(/^l/m);
    expect(stdout).toMatch(/kubefn\/crds\/proxies\.crawl\.kubefn\.dev\.yaml/);
    expect(stdout).toMatch(/kubefn\/files\/rbac\/admission-policy\.yaml/);
    const chart = await run("tar", ["xzOf", join(out, `kubefn-${version}.tgz`), "kubefn/Chart.yaml"]);
    expect(parse(chart.stdout)).toMatchObject({ version, appVersion: version });
  });

  it("zips the Lambda bundle the template points at", async () => {
    const template = parse(readFileSync(join(out, "aws/template.yaml"), "utf8"), { logLevel: "error" }) as {
      Resources: Record<"Kubefn" | "KubefnReconcile", { Properties: { CodeUri: string; Handler: string } }>;
    };
    for (const fn of ["Kubefn", "KubefnReconcile"] as const) {
      const { CodeUri, Handler } = template.Resources[fn].Properties;
      expect(CodeUri).toBe(`kubefn-aws-${version}.zip`);
      const { stdout } = await run("python3", ["-m", "zipfile", "-l", join(out, "aws", CodeUri)]);
      expect(stdout).toMatch(new RegExp(`^${Handler.split(".")[0]}\\.mjs\\s`, "m"));
    }
  });

  it("deploys the Worker as built from its own wrangler.toml (no build step)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kubefn-worker-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const config = readFileSync(join(out, "cloudflare/wrangler.toml"), "utf8");
    expect(config).not.toMatch(/^\[build\]/m);
    await run(
      join(root, "node_modules/.bin/wrangler"),
      ["deploy", "--dry-run", "--outdir", dir, "--config", join(out, "cloudflare/wrangler.toml")],
      { cwd: join(out, "cloudflare"), env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
    );
    expect(readFileSync(join(dir, "worker.js"), "utf8")).toBe(
      readFileSync(join(out, "cloudflare/worker.js"), "utf8"),
    );
  }, 120_000);
});
