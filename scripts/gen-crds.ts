/**
 * Writes infra/crds/<plural>.<group>.yaml for every controller's CRD, derived from the zod
 * schemas in shared/controllers/<name>/api.ts. With `--check`, writes nothing and exits 1 when the
 * committed files differ from what the schemas produce (or a generated file is stale or missing).
 *
 * Usage: npm run gen:crds [-- --check]
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { operatorCrds } from "../install/index.ts";
import { operatorManifests } from "../shared/controllers/site/components/index.ts";
import type { CustomResourceDefinition } from "../shared/crd/index.ts";
import { crdFor, structuralViolations } from "../shared/crd/index.ts";
// Build time only: the YAML renderer is not part of the folder's runtime surface (index.ts).
import { crdFileName, generatedPrefix, renderCrdYaml } from "../shared/crd/render.ts";

const crdDir = fileURLToPath(new URL("../infra/crds/", import.meta.url));

/** The files infra/crds should hold, by file name. Throws when a CRD is not structural. */
export async function expectedCrdFiles(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const spec of await operatorCrds()) {
    const crd = crdFor(spec);
    for (const version of crd.spec.versions) {
      const problems = structuralViolations(version.schema.openAPIV3Schema);
      if (problems.length > 0)
        throw new Error(`${crd.metadata.name} is not structural:\n  ${problems.join("\n  ")}`);
    }
    files.set(crdFileName(crd), renderCrdYaml(crd));
  }
  // The CRDs the Site operator's bundle carries (machina's machines.unbounded-cloud.io): the
  // installer puts them in place, as every other CRD; components never apply a CRD.
  for (const object of operatorManifests().filter((o) => o.kind === "CustomResourceDefinition")) {
    const crd = object as unknown as CustomResourceDefinition;
    const header = `${generatedPrefix} from the Site operator's bundle (shared/controllers/site/components/*.yaml). DO NOT EDIT.`;
    files.set(crdFileName(crd), renderCrdYaml(crd, header));
  }
  return files;
}

/** Generated files currently on disk (those starting with the generated header), by file name. */
async function generatedFilesOnDisk(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const names = await readdir(crdDir).catch(() => [] as string[]);
  for (const name of names.filter((n) => n.endsWith(".yaml")).sort()) {
    const text = await readFile(join(crdDir, name), "utf8");
    if (text.startsWith(generatedPrefix)) files.set(name, text);
  }
  return files;
}

function firstDifference(a: string, b: string): string {
  const left = a.split("\n");
  const right = b.split("\n");
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    if (left[i] !== right[i]) {
      return `line ${i + 1}:\n    committed: ${left[i] ?? "<end of file>"}\n    generated: ${right[i] ?? "<end of file>"}`;
    }
  }
  return "identical";
}

async function main(argv: string[]): Promise<number> {
  const check = argv.includes("--check");
  const expected = await expectedCrdFiles();
  const actual = await generatedFilesOnDisk();
  if (check) {
    const drift: string[] = [];
    for (const [name, text] of expected) {
      const onDisk = actual.get(name);
      if (onDisk === undefined) drift.push(`missing  infra/crds/${name}`);
      else if (onDisk !== text) drift.push(`differs  infra/crds/${name} at ${firstDifference(onDisk, text)}`);
    }
    for (const name of actual.keys()) {
      if (!expected.has(name)) drift.push(`stale    infra/crds/${name} (no controller generates it)`);
    }
    if (drift.length > 0) {
      console.error(`infra/crds is out of date; run \`npm run gen:crds\`:\n${drift.join("\n")}`);
      return 1;
    }
    console.log(`infra/crds is up to date (${expected.size} CRDs)`);
    return 0;
  }
  await mkdir(crdDir, { recursive: true });
  for (const name of actual.keys()) {
    if (!expected.has(name)) await rm(join(crdDir, name));
  }
  for (const [name, text] of expected) {
    if (actual.get(name) !== text) await writeFile(join(crdDir, name), text);
    console.log(`${actual.get(name) === text ? "unchanged" : "wrote    "} infra/crds/${name}`);
  }
  return 0;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = await main(process.argv.slice(2));
}
