export { controllerKinds } from "./kinds.ts";
