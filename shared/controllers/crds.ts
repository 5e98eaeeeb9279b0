import type { CrdSpec } from "../crd/index.ts";
import { proxyCrd } from "./proxy/index.ts";
import { siteCrd } from "./site/index.ts";
import { subPoolCrd } from "./subpool/index.ts";

/**
 * Every kind kubefn serves, as CRD specs. `npm run gen:crds` writes one file per entry to
 * infra/crds; adding a controller's CRD means adding it here.
 */
export const controllerCrds: readonly CrdSpec[] = [proxyCrd, subPoolCrd, siteCrd];
