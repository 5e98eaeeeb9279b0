import { describe, expect, it } from "vitest";
import * as mini from "zod/mini";
import * as z from "./index.ts";

describe("shared/zod's narrowed iso and coerce", () => {
  it.each([
    "2026-11-30T21:00:00Z",
    "2026-11-30T21:00:00.123+01:00",
    "2026-11-30T21:00:00",
    "2026-11-30",
    "yesterday",
    42,
  ])("iso.datetime({ offset: true }) judges %j as zod's does", (input) => {
    const ours = z.iso.datetime({ offset: true }).safeParse(input);
    const zods = mini.iso.datetime({ offset: true }).safeParse(input);
    expect(ours.success).toBe(zods.success);
    expect(ours.error?.issues.map((i) => i.message)).toEqual(zods.error?.issues.map((i) => i.message));
  });

  it.each(["5", " 7 ", "", "x", 3, null, undefined])("coerce.number() judges %j as zod's does", (input) => {
    const schema = z.coerce.number().check(z.int()).check(z.gte(1));
    const reference = mini.coerce.number().check(mini.int()).check(mini.gte(1));
    const ours = schema.safeParse(input);
    const zods = reference.safeParse(input);
    expect(ours.data).toEqual(zods.data);
    expect(ours.error?.issues.map((i) => i.message)).toEqual(zods.error?.issues.map((i) => i.message));
  });
});
