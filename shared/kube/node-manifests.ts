/**
 * Reading manifests from a directory (the seed's `YamlFiles` over an `fs.FS`). Node-only, like the
 * rest of shared/kube/node*: a Worker has no filesystem, so there the manifests are the ones
 * bundled into the code; the Node host can take a directory instead (`SITE_MANIFESTS_DIR`).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "./port.ts";

/** The YAML files (`.yaml`, `.yml`) directly in `dir`, sorted by name, as the seed's `YamlFiles`. */
export function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && /\.ya?ml$/i.test(e.name))
    .map((e) => e.name)
    .sort();
}

/**
 * Every object in the YAML files of `dir`, file by file in {@link yamlFiles} order, document by
 * document; empty documents are skipped.
 *
 * @throws Error naming the file when one does not parse.
 */
export function readManifestDirectory(dir: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const file of yamlFiles(dir)) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      const obj = doc.toJSON() as KubeObject | null;
      if (obj?.kind) objects.push(obj);
    }
  }
  return objects;
}
