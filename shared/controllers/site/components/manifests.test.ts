/**
 * Drift test of the build-time manifests: every `*.manifests.ts` module equals what
 * `npm run gen:manifests` makes from its YAML source, so an edited YAML cannot ship unparsed.
 */
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { generatedPath, manifestSources, renderManifestModule } from "../../../../scripts/gen-manifests.ts";
import { parseManifests } from "../manifests-yaml.ts";
import { netManifests } from "./net.manifests.ts";
import { netConfigName } from "./net.ts";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const sources = await manifestSources();

describe("generated manifests", () => {
  it("has a source for the Site net component", () => {
    expect(sources).toContain("shared/controllers/site/components/net.yaml");
  });

  it.each(sources)("%s: the committed module is what the generator makes", async (source) => {
    const yaml = await readFile(`${root}${source}`, "utf8");
    expect(await readFile(`${root}${generatedPath(source)}`, "utf8")).toBe(
      renderManifestModule(source, yaml),
    );
  });

  it("net's objects are the YAML's, and name the ConfigMap net watches", async () => {
    const yaml = await readFile(`${root}shared/controllers/site/components/net.yaml`, "utf8");
    expect(netManifests).toEqual(parseManifests(yaml));
    expect(netManifests.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      "ServiceAccount/net",
      "ServiceAccount/metalman",
      `ConfigMap/${netConfigName}`,
    ]);
  });
});
