export { controllerCrds } from "./crds.ts";
export { controllerKinds } from "./kinds.ts";
