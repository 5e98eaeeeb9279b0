/**
 * Every setting's documented numeric range, read from the settings schema itself: the `gte`/`lte`
 * checks of each numeric variable, and {@link operatorSettingRanges} for the operator settings the
 * schema takes as strings (so that a bad value stops only their operator). The range test
 * (test/unit/setting-bounds.test.ts) starts every platform with each setting at each bound, so a
 * new ranged setting is exercised without anyone listing it.
 */
import { operators } from "../controllers/index.ts";
import type * as z from "../zod/index.ts";

/** A numeric setting's range; `max` undefined when the schema sets none. */
export interface SettingRange {
  min: number;
  max?: number;
  /** Whole numbers only. */
  integer: boolean;
}

/**
 * Ranges of operator settings parsed by hand (each operator's settings `ranges`), not by zod: a
 * value out of range stops only that setting's operator, with a condition, never the process.
 */
export const operatorSettingRanges: Readonly<Record<string, SettingRange>> = Object.assign(
  {},
  ...operators.map((o) => o.settings?.ranges ?? {}),
);

type CheckDef = { check?: string; value?: number; inclusive?: boolean; format?: string };
type SchemaInternals = {
  _zod: { def: { type: string; innerType?: unknown; in?: unknown; checks?: { _zod: { def: CheckDef } }[] } };
};

/** The numeric range a zod schema declares (through optional, default and coerce), if any. */
export function rangeOf(schema: unknown): SettingRange | undefined {
  let s = schema as SchemaInternals;
  while (s._zod.def.innerType) s = s._zod.def.innerType as SchemaInternals;
  if (s._zod.def.type !== "number") return undefined;
  let min: number | undefined;
  let max: number | undefined;
  let integer = false;
  for (const check of s._zod.def.checks ?? []) {
    const def = check._zod.def;
    if (def.check === "number_format" && (def.format === "safeint" || def.format === "int32")) integer = true;
    if (def.check === "greater_than" && def.value !== undefined)
      min = def.inclusive ? def.value : def.value + (integer ? 1 : Number.EPSILON);
    if (def.check === "less_than" && def.value !== undefined)
      max = def.inclusive ? def.value : def.value - (integer ? 1 : Number.EPSILON);
  }
  return min === undefined ? undefined : { min, ...(max === undefined ? {} : { max }), integer };
}

/** Every ranged variable of `shape` (a settings schema's fields), with the operator settings' ranges. */
export function settingRanges(shape: Record<string, z.ZodMiniType>): Record<string, SettingRange> {
  const ranges: Record<string, SettingRange> = {};
  for (const [name, schema] of Object.entries(shape)) {
    const range = rangeOf(schema);
    if (range) ranges[name] = range;
  }
  for (const [name, range] of Object.entries(operatorSettingRanges)) if (name in shape) ranges[name] = range;
  return ranges;
}
