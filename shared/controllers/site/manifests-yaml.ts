import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../kube/index.ts";

/**
 * The objects in a multi-document YAML string, in order; empty documents are skipped. Build
 * time only (scripts/gen-manifests.ts and tests): production code imports the generated
 * `*.manifests.ts` modules, so no YAML parser ships in a bundle.
 */
export function parseManifests(yaml: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const doc of parseAllDocuments(yaml)) {
    if (doc.errors.length > 0) throw doc.errors[0];
    const obj = doc.toJSON() as KubeObject | null;
    if (obj?.kind) objects.push(obj);
  }
  return objects;
}
