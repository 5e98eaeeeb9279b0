export {
  type Condition,
  conditionSchema,
  conditionsNotes,
  conditionsSchema,
  withSummary,
} from "./conditions.ts";
export {
  type CrdSpec,
  type CustomResourceDefinition,
  crdFor,
  type KindSpec,
  kubefnCategory,
  objectSchemaFor,
  type PrinterColumn,
  resourceFor,
} from "./crd.ts";
export { documented, type FieldNote, withMeta } from "./meta.ts";
export { type Quantity, quantitySchema } from "./quantity.ts";
export {
  type CelRule,
  type JsonSchemaProps,
  structuralSchemaOf,
  UnstructuralSchemaError,
  withCel,
} from "./schema.ts";
export { structuralViolations } from "./structural.ts";
