import * as z from "../zod/index.ts";

/**
 * `schema` with a description for the generated CRD (zod classic's `.describe()`, for zod/mini):
 * a clone, registered in zod's global registry, whose metadata extends the original's.
 */
export function described<T extends z.ZodMiniType>(schema: T, description: string): T {
  return withMeta(schema, { description });
}

/** `schema` with JSON Schema metadata (zod classic's `.meta(m)`): a registered clone, as {@link described}. */
export function withMeta<T extends z.ZodMiniType>(schema: T, meta: z.core.GlobalMeta): T {
  const clone = schema.clone() as T;
  z.globalRegistry.add(clone, meta);
  return clone;
}
