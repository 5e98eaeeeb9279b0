import { describe, expect, it } from "vitest";
import zodEnglish from "zod/v4/locales/en.js";
import * as z from "./index.ts";
import { englishMessage } from "./messages.ts";

const zods = zodEnglish().localeError;

/** Each issue a parse raises (with its input), worded by kubefn's messages and by zod's locale. */
function wordings(schema: z.ZodMiniType, input: unknown): Array<[string, unknown]> {
  const issues = schema.safeParse(input, { reportInput: true }).error?.issues ?? [];
  return issues.map((issue) => {
    const raw = issue as z.core.$ZodRawIssue;
    return [englishMessage(raw), zods(raw)];
  });
}

class Custom {}

describe("kubefn's zod messages", () => {
  it.each<[string, z.ZodMiniType, unknown]>([
    ["string given a number", z.string(), 5],
    ["string given null", z.string(), null],
    ["string given an array", z.string(), []],
    ["string given a Date", z.string(), new Date(0)],
    ["string given a class instance", z.string(), new Custom()],
    ["string given a prototype-less object", z.string(), Object.create(null)],
    ["number given NaN", z.number(), Number.NaN],
    ["number given Infinity", z.number(), Number.POSITIVE_INFINITY],
    ["int given a fraction", z.int(), 1.5],
    ["boolean given a string", z.boolean(), "yes"],
    ["object given a string", z.object({ a: z.string() }), "x"],
    ["missing field", z.object({ a: z.string() }), {}],
    ["unknown keys", z.strictObject({ a: z.string() }), { a: "x", b: 1, c: 2 }],
    ["unknown key", z.strictObject({}), { b: 1 }],
    ["enum", z.enum(["Managed", "External"]), "Other"],
    ["literal", z.literal("v1"), "v2"],
    ["minLength", z.string().check(z.minLength(3)), "ab"],
    ["maxLength", z.string().check(z.maxLength(2)), "abc"],
    ["exact length", z.string().check(z.length(2)), "abc"],
    ["array maxLength", z.array(z.int()).check(z.maxLength(1)), [1, 2]],
    ["gte", z.int().check(z.gte(5)), 4],
    ["lte", z.int().check(z.lte(5)), 6],
    ["gt", z.number().check(z.gt(5)), 5],
    ["lt", z.number().check(z.lt(5)), 5],
    ["multipleOf", z.number().check(z.multipleOf(3)), 4],
    ["regex", z.string().check(z.regex(/^[a-z]+$/)), "A"],
    ["includes", z.string().check(z.includes("PRIVATE KEY")), "x"],
    ["startsWith", z.string().check(z.startsWith("arn:")), "x"],
    ["endsWith", z.string().check(z.endsWith(".com")), "x"],
    ["url", z.url(), "not a url"],
    ["email", z.email(), "nobody"],
    ["datetime", z.iso.datetime({ offset: true }), "yesterday"],
    ["record key", z.record(z.string().check(z.minLength(2)), z.string()), { a: "x" }],
    ["record value", z.record(z.string(), z.string()), { a: 1 }],
    ["union", z.union([z.string(), z.int()]), true],
    ["coerced number", z.coerce.number().check(z.int()), "x"],
  ])("words %s as zod's English locale does", (_, schema, input) => {
    const pairs = wordings(schema, input);
    expect(pairs.length).toBeGreaterThan(0);
    for (const [ours, theirs] of pairs) expect(ours).toBe(theirs);
  });

  it("is what a failed parse reports", () => {
    const result = z.object({ port: z.int().check(z.lte(65535)) }).safeParse({ port: 70000 });
    expect(z.prettifyError(result.error!)).toBe("✖ Too big: expected number to be <=65535\n  → at port");
  });

  it("names a format it has no noun for by zod's format name", () => {
    expect(englishMessage({ code: "invalid_format", format: "ipv4", input: "x", path: [] })).toBe(
      "Invalid ipv4",
    );
  });
});
