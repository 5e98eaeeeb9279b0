export { type Condition, conditionSchema, conditionsSchema } from "./conditions.ts";
export {
  type CrdSpec,
  type CustomResourceDefinition,
  crdFor,
  objectSchemaFor,
  type PrinterColumn,
  resourceFor,
} from "./crd.ts";
export { described, withMeta } from "./meta.ts";
export { type Quantity, quantitySchema } from "./quantity.ts";
export {
  type CelRule,
  type JsonSchemaProps,
  structuralSchemaOf,
  UnstructuralSchemaError,
  withCel,
} from "./schema.ts";
export { structuralViolations } from "./structural.ts";
