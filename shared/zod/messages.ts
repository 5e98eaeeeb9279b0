/**
 * kubefn's English error messages for zod: the same text as zod's own English locale
 * (`zod/v4/locales/en`) for every issue kubefn's schemas raise, without the locale's tables for
 * string formats and collection types kubefn never validates (emoji, IBAN, sets, files…), which
 * would otherwise ship in the Worker bundle. A format missing from {@link formatNouns} reads
 * "Invalid <format>". messages.test.ts holds the two side by side.
 */
import type * as z from "zod/mini";

type Issue = z.core.$ZodRawIssue;

/** The string formats kubefn's schemas use, as zod's English locale names them. */
const formatNouns: Readonly<Record<string, string>> = {
  regex: "input",
  email: "email address",
  url: "URL",
  datetime: "ISO datetime",
};

/** What a size bound counts, by the kind of value it bounds. */
const sizeUnits: Readonly<Record<string, string>> = { string: "characters", array: "items" };

/** `typeof`, with zod's distinctions: nan, null, array, and class names. */
function typeName(value: unknown): string {
  if (typeof value === "number")
    return Number.isNaN(value) ? "NaN" : Number.isFinite(value) ? "number" : String(value);
  if (typeof value !== "object") return typeof value;
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  const ctor = Object.getPrototypeOf(value) === Object.prototype ? undefined : value.constructor;
  return typeof ctor === "function" && ctor.name !== "" ? ctor.name : "object";
}

function literal(value: unknown): string {
  if (typeof value === "bigint") return `${value}n`;
  return typeof value === "string" ? `"${value}"` : `${value}`;
}

function bound(
  issue: { origin?: string; inclusive?: boolean; exact?: boolean },
  big: boolean,
  limit: unknown,
) {
  const adj = issue.exact ? "exactly " : issue.inclusive ? (big ? "<=" : ">=") : big ? "<" : ">";
  const unit = issue.origin === undefined ? undefined : sizeUnits[issue.origin];
  const what = issue.origin ?? "value";
  return unit ? `expected ${what} to have ${adj}${limit} ${unit}` : `expected ${what} to be ${adj}${limit}`;
}

/** zod's `localeError`: the message of an issue that its schema or check did not word itself. */
export function englishMessage(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type":
      return `Invalid input: expected ${issue.expected === "nan" ? "NaN" : issue.expected}, received ${typeName(issue.input)}`;
    case "invalid_value":
      return issue.values.length === 1
        ? `Invalid input: expected ${literal(issue.values[0])}`
        : `Invalid option: expected one of ${issue.values.map(literal).join("|")}`;
    case "too_big":
      return `Too big: ${bound(issue, true, issue.maximum)}`;
    case "too_small":
      return `Too small: ${bound(issue, false, issue.minimum)}`;
    case "invalid_format": {
      if (issue.format === "starts_with") return `Invalid string: must start with "${issue.prefix}"`;
      if (issue.format === "ends_with") return `Invalid string: must end with "${issue.suffix}"`;
      if (issue.format === "includes") return `Invalid string: must include "${issue.includes}"`;
      if (issue.format === "regex") return `Invalid string: must match pattern ${issue.pattern}`;
      return `Invalid ${formatNouns[issue.format] ?? issue.format}`;
    }
    case "not_multiple_of":
      return `Invalid number: must be a multiple of ${issue.divisor}`;
    case "unrecognized_keys":
      return `Unrecognized key${issue.keys.length > 1 ? "s" : ""}: ${issue.keys.map(literal).join(", ")}`;
    case "invalid_key":
      return `Invalid key in ${issue.origin}`;
    case "invalid_element":
      return `Invalid value in ${issue.origin}`;
    default:
      return "Invalid input";
  }
}
