import { describe, expect, it } from "vitest";
import * as z from "zod";
import * as zm from "../zod/index.ts";
import {
  conditionsNotes,
  conditionsSchema,
  documented,
  quantitySchema,
  structuralSchemaOf,
  UnstructuralSchemaError,
  withCel,
} from "./index.ts";

const immutable = { rule: "self == oldSelf", message: "immutable" };

describe("structuralSchemaOf: zod feature → schema node", () => {
  it.each([
    ["string", z.string(), { type: "string" }],
    ["enum", z.enum(["A", "B"]), { type: "string", enum: ["A", "B"] }],
    ["literal union → enum", z.union([z.literal("a"), z.literal("b")]), { type: "string", enum: ["a", "b"] }],
    ["literal", z.literal("x"), { type: "string", enum: ["x"] }],
    ["default", z.enum(["A", "B"]).default("A"), { type: "string", enum: ["A", "B"], default: "A" }],
    ["int min/max", z.int().min(1).max(65535), { type: "integer", minimum: 1, maximum: 65535 }],
    ["int without bounds drops zod's safe-integer bounds", z.int(), { type: "integer" }],
    ["number gt", z.number().gt(0), { type: "number", minimum: 0, exclusiveMinimum: true }],
    [
      "string length + pattern",
      z.string().min(1).max(5).regex(/^a+$/),
      { type: "string", minLength: 1, maxLength: 5, pattern: "^a+$" },
    ],
    ["url → format uri", z.url(), { type: "string", format: "uri" }],
    ["datetime → format date-time, no zod regex", z.iso.datetime(), { type: "string", format: "date-time" }],
    ["email → format email, no lookaround regex", z.email(), { type: "string", format: "email" }],
    ["boolean default", z.boolean().default(false), { type: "boolean", default: false }],
    ["describe", z.string().describe("hello"), { description: "hello", type: "string" }],
    ["nullable", z.string().nullable(), { type: "string", nullable: true }],
    [
      "record of strings → map",
      z.record(z.string(), z.string()),
      { type: "object", additionalProperties: { type: "string" } },
    ],
    [
      "record of unknown → preserve",
      z.record(z.string(), z.unknown()),
      { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    ],
    ["unknown → preserve", z.unknown(), { "x-kubernetes-preserve-unknown-fields": true }],
    [
      "array of objects",
      z.array(z.object({ name: z.string(), port: z.int().optional() })).max(4),
      {
        type: "array",
        maxItems: 4,
        items: {
          type: "object",
          properties: { name: { type: "string" }, port: { type: "integer" } },
          required: ["name"],
        },
      },
    ],
    [
      "optional and defaulted fields are not required",
      z.object({ a: z.string(), b: z.string().optional(), c: z.int().default(3) }),
      {
        type: "object",
        properties: { a: { type: "string" }, b: { type: "string" }, c: { type: "integer", default: 3 } },
        required: ["a"],
      },
    ],
    [
      "CEL through withCel",
      withCel(z.string(), [immutable]),
      { type: "string", "x-kubernetes-validations": [immutable] },
    ],
    [
      "CEL through .meta()",
      z.object({ a: z.string().optional() }).meta({ "x-kubernetes-validations": [{ rule: "has(self.a)" }] }),
      {
        type: "object",
        properties: { a: { type: "string" } },
        "x-kubernetes-validations": [{ rule: "has(self.a)" }],
      },
    ],
    [
      "CEL survives .refine and .optional",
      withCel(z.object({ a: z.string() }), [immutable])
        .refine(() => true)
        .optional(),
      {
        type: "object",
        properties: { a: { type: "string" } },
        required: ["a"],
        "x-kubernetes-validations": [immutable],
      },
    ],
    [
      "quantity → int-or-string",
      quantitySchema(),
      {
        anyOf: [{ type: "integer" }, { type: "string" }],
        pattern: expect.any(String),
        "x-kubernetes-int-or-string": true,
      },
    ],
    [
      "integer or string → int-or-string",
      z.union([z.int(), z.string()]),
      { anyOf: [{ type: "integer" }, { type: "string" }], "x-kubernetes-int-or-string": true },
    ],
  ])("%s", (_name, schema, expected) => {
    expect(structuralSchemaOf(schema as z.ZodType)).toEqual(expected);
  });

  it("flattens an intersection of objects", () => {
    const both = z.intersection(z.object({ a: z.string() }), z.object({ b: z.int().optional() }));
    expect(structuralSchemaOf(both)).toEqual({
      type: "object",
      properties: { a: { type: "string" }, b: { type: "integer" } },
      required: ["a"],
    });
  });

  it("appends withCel rules to rules already attached", () => {
    const twice = withCel(withCel(z.string(), [{ rule: "a" }]), [{ rule: "b" }]);
    expect(structuralSchemaOf(twice)["x-kubernetes-validations"]).toEqual([{ rule: "a" }, { rule: "b" }]);
  });

  it("inlines a schema reused in several places", () => {
    const ref = z.object({ name: z.string() });
    const out = structuralSchemaOf(z.object({ a: ref, b: ref }));
    expect(out.properties?.a).toEqual(out.properties?.b);
    expect(JSON.stringify(out)).not.toContain("$ref");
  });

  it("emits conditions as a map-list keyed by type", () => {
    const status = documented(
      zm.object({ conditions: conditionsSchema() }),
      conditionsNotes("conditions", ["Ready"]),
    );
    const out = structuralSchemaOf(status).properties!.conditions!;
    expect(out).toMatchObject({
      type: "array",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      items: { type: "object", required: ["type", "status", "lastTransitionTime", "reason", "message"] },
    });
    expect(out.description).toContain("Known types: Ready.");
  });

  it.each([
    ["union of objects", z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]), ".a"],
    ["union of types", z.union([z.string(), z.boolean()]), ".a"],
    ["union of an integer and two strings", z.union([z.int(), z.string(), z.string().min(1)]), ".a"],
    ["tuple", z.tuple([z.string(), z.int()]), ".a"],
  ])("rejects %s with the path", (_name, schema, path) => {
    const build = () => structuralSchemaOf(z.object({ a: schema as z.ZodType }));
    expect(build).toThrow(UnstructuralSchemaError);
    expect(build).toThrow(path);
  });

  it("rejects a recursive schema", () => {
    interface Tree {
      children: Tree[];
    }
    const tree: z.ZodType<Tree> = z.object({
      get children() {
        return z.array(tree);
      },
    });
    expect(() => structuralSchemaOf(tree)).toThrow();
  });
});

describe("documented: CRD-only notes beside the runtime schema", () => {
  const runtime = zm.object({
    a: zm.optional(zm.object({ b: zm.array(zm.object({ c: zm.string() })) })),
    d: zm._default(zm.int(), 1),
  });

  it("puts descriptions and CEL rules at paths through optional, array and default nodes", () => {
    const out = structuralSchemaOf(
      documented(runtime, {
        "": { cel: [immutable] },
        a: "A.",
        "a.b.c": { description: "C.", cel: [immutable] },
        d: "D.",
      }),
    );
    expect(out["x-kubernetes-validations"]).toEqual([immutable]);
    expect(out.properties?.a?.description).toBe("A.");
    expect(out.properties?.a?.properties?.b?.items?.properties?.c).toEqual({
      description: "C.",
      type: "string",
      "x-kubernetes-validations": [immutable],
    });
    expect(out.properties?.d).toEqual({ description: "D.", type: "integer", default: 1 });
  });

  it("leaves the runtime schema without notes", () => {
    documented(runtime, { a: "A.", "a.b.c": "C." });
    expect(JSON.stringify(structuralSchemaOf(runtime))).not.toContain("description");
  });

  it("names a path that does not exist", () => {
    expect(() => documented(runtime, { "a.x": "X." })).toThrow('no field "x" on the way to "a.x"');
  });
});
