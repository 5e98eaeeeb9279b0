import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type AnyOperator, operators } from "../shared/controllers/index.ts";
import type { CrdSpec } from "../shared/crd/index.ts";
import { repositoryRoot } from "./manifest.ts";

/**
 * Every CRD the operators of `list` serve, in list order: each operator's `crds` module loaded
 * from the repository (Node only: the runtime never loads the CRD notes).
 *
 * @throws when a named export is missing or is not a CRD spec.
 */
export async function operatorCrds(list: readonly AnyOperator[] = operators): Promise<CrdSpec[]> {
  const crds: CrdSpec[] = [];
  for (const operator of list) {
    const module = (await import(pathToFileURL(join(repositoryRoot(), operator.crds.module)).href)) as Record<
      string,
      unknown
    >;
    for (const name of operator.crds.exports) {
      const spec = module[name] as Partial<CrdSpec> | undefined;
      if (!spec?.group || !spec.kind || !spec.plural)
        throw new Error(`${operator.name}: ${operator.crds.module} has no CRD spec named ${name}`);
      crds.push(spec as CrdSpec);
    }
  }
  return crds;
}
