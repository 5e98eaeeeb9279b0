import type { CrdSpec } from "../crd/index.ts";
import { proxyCrd } from "./proxy/crd.ts";
import { siteCrd } from "./site/crd.ts";
import { subPoolCrd } from "./subpool/crd.ts";

/**
 * Every kind kubefn serves, as CRD specs. `npm run gen:crds` writes one file per entry to
 * infra/crds; adding a controller's CRD means adding it here. Imported directly (scripts, tests),
 * not through index.ts: the runtime never loads the CRD notes.
 */
export const controllerCrds: readonly CrdSpec[] = [proxyCrd, subPoolCrd, siteCrd];
