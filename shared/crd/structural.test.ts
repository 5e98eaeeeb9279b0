import { describe, expect, it } from "vitest";
import type { JsonSchemaProps } from "./index.ts";
import { structuralViolations } from "./index.ts";

const root = (spec: JsonSchemaProps): JsonSchemaProps => ({
  type: "object",
  properties: { metadata: { type: "object" }, spec },
});

describe("structuralViolations", () => {
  it("accepts a structural schema with maps, lists, int-or-string and map-lists", () => {
    const spec: JsonSchemaProps = {
      type: "object",
      properties: {
        labels: { type: "object", additionalProperties: { type: "string" } },
        free: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
        size: { anyOf: [{ type: "integer" }, { type: "string" }], "x-kubernetes-int-or-string": true },
        conditions: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["type"],
          items: { type: "object", properties: { type: { type: "string" } }, required: ["type"] },
        },
        choice: {
          type: "object",
          properties: { a: { type: "string" }, b: { type: "string" } },
          oneOf: [{ required: ["a"] }, { required: ["b"] }],
        },
      },
      "x-kubernetes-validations": [{ rule: "true" }],
    };
    expect(structuralViolations(root(spec))).toEqual([]);
  });

  it.each<[string, JsonSchemaProps, string]>([
    ["a property without type", { type: "object", properties: { a: {} } }, ".spec.a: missing type"],
    ["items without type", { type: "array", items: { description: "x" } }, ".spec[*]: missing type"],
    ["an array without items", { type: "array" }, ".spec: array without items"],
    ["a $ref", { type: "object", $ref: "#/$defs/x" }, '"$ref" is not allowed'],
    ["definitions", { type: "object", definitions: {} }, '"definitions" is not allowed'],
    [
      "additionalProperties: false",
      { type: "object", additionalProperties: false as never },
      "must be a schema",
    ],
    [
      "properties beside additionalProperties",
      { type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "string" } },
      "mutually exclusive",
    ],
    [
      "type inside anyOf",
      { type: "string", anyOf: [{ type: "string" }, { type: "integer" }] },
      "inside a logical junctor",
    ],
    [
      "default inside oneOf",
      { type: "string", oneOf: [{ default: "a" }] },
      '"default" is not allowed inside',
    ],
    [
      "a junctor property missing outside",
      { type: "object", properties: {}, anyOf: [{ properties: { x: { pattern: "a" } } }] },
      'property "x" must also be specified outside',
    ],
    ["a lookahead pattern", { type: "string", pattern: "^(?!a)b$" }, "lookaround"],
    ["a backreference", { type: "string", pattern: "^(a)\\1$" }, "backreference"],
    [
      "map keys without list-type map",
      {
        type: "array",
        items: { type: "object", properties: { k: { type: "string" } }, required: ["k"] },
        "x-kubernetes-list-map-keys": ["k"],
      },
      "needs x-kubernetes-list-type: map",
    ],
    [
      "a map key that is optional",
      {
        type: "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["k"],
        items: { type: "object", properties: { k: { type: "string" } } },
      },
      'map key "k" must be required or defaulted',
    ],
    ["an empty CEL rule", { type: "string", "x-kubernetes-validations": [{ rule: "" }] }, "needs a rule"],
    [
      "preserve-unknown-fields false",
      { type: "object", "x-kubernetes-preserve-unknown-fields": false as never },
      "must be true",
    ],
    [
      "a required field that is not a property",
      { type: "object", properties: {}, required: ["a"] },
      'required field "a"',
    ],
  ])("rejects %s", (_name, spec, problem) => {
    const problems = structuralViolations(root(spec));
    expect(problems.join("\n")).toContain(problem);
  });

  it("requires metadata to be exactly {type: object}, with at most name and generateName as strings", () => {
    const withMetadata = (metadata: JsonSchemaProps): JsonSchemaProps => ({
      type: "object",
      properties: { metadata },
    });
    expect(
      structuralViolations(withMetadata({ type: "object", properties: { name: { type: "string" } } })),
    ).toEqual([]);
    const refused: JsonSchemaProps[] = [
      { type: "object", properties: { labels: { type: "object" } } },
      { type: "object", properties: { name: { type: "string", maxLength: 40 } } },
      { type: "object", description: "no" },
    ];
    for (const metadata of refused) {
      expect(structuralViolations(withMetadata(metadata))).toEqual([
        expect.stringContaining(".metadata: metadata must be exactly"),
      ]);
    }
  });

  it("requires an object root", () => {
    expect(structuralViolations({ type: "string" })).toContain("<root>: root must be type object");
  });
});
