import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { readManifestDirectory, yamlFiles } from "./node-manifests.ts";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("manifest directory reader (YamlFiles)", () => {
  it("lists the YAML files sorted, skipping other files and subdirectories", () => {
    dir = mkdtempSync(join(tmpdir(), "manifests-"));
    writeFileSync(
      join(dir, "20-deploy.yaml"),
      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
    );
    writeFileSync(
      join(dir, "10-sa.yml"),
      "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n---\n",
    );
    writeFileSync(join(dir, "README.md"), "# not a manifest");
    mkdirSync(join(dir, "nested.yaml"));
    expect(yamlFiles(dir)).toEqual(["10-sa.yml", "20-deploy.yaml"]);
    expect(readManifestDirectory(dir).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      "ServiceAccount/a",
      "Deployment/d",
    ]);
  });

  it("names the file that does not parse", () => {
    dir = mkdtempSync(join(tmpdir(), "manifests-"));
    writeFileSync(join(dir, "bad.yaml"), "kind: [unclosed\n");
    expect(() => readManifestDirectory(dir)).toThrow(/^bad\.yaml: /);
  });
});
