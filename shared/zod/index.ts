/**
 * zod as kubefn uses it: `zod/mini` (functions instead of methods, so that the Worker bundle
 * keeps only the validators it calls), with English messages in zod's own wording (messages.ts),
 * which classic zod installs by itself and mini does not. shared/ and functions/ import zod only
 * through this module (infra/relay, on Node only, uses classic zod).
 */
import * as z from "zod/mini";
import { _coercedNumber } from "zod/v4/core";
import { englishMessage } from "./messages.ts";

z.config({ localeError: englishMessage });

export * from "zod/mini";

// zod's `iso` and `coerce` are namespace objects: using one member keeps all of them, and their
// schema classes (dates, durations, bigints), in the bundle. These keep only what kubefn uses;
// they shadow the namespaces of the `export *` above.

const dateTime =
  /^(\d{4})-(\d\d)-(\d\d)T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

/** An RFC 3339 date-time with seconds and `Z` or an offset, on a real calendar day. */
export function isDateTime(s: string): boolean {
  const m = dateTime.exec(s);
  if (!m) return false;
  const day = new Date(0);
  day.setUTCFullYear(+m[1]!, +m[2]! - 1, +m[3]!);
  return day.getUTCMonth() === +m[2]! - 1;
}

/**
 * `z.iso`, only `datetime({ offset: true })`: zod's judgement, message and JSON Schema
 * (`format: date-time`), without the regex builders (about 370 bytes of the Worker bundle).
 */
export const iso = {
  datetime: (_params: { offset: true }) => z.stringFormat("datetime", isDateTime),
};

/** `z.coerce`, only `number`. */
export const coerce = {
  number: (params?: Parameters<typeof z.coerce.number>[0]) => _coercedNumber(z.ZodMiniNumber, params),
};

/** A comma-separated list (a setting's value), trimmed, empties dropped. */
export const commaList = z.pipe(
  z.string(),
  z.transform((s: string) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  ),
);

/**
 * A setting holding JSON text, parsed then checked by `schema`; text that is not JSON is one issue,
 * "must be `what`".
 *
 * @example
 * const clustersVariable = z.optional(jsonText(clustersSchema, "a JSON list of clusters"));
 */
export function jsonText<T extends z.ZodMiniType>(schema: T, what: string) {
  return z.pipe(
    z.pipe(
      z.string(),
      z.transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.issues.push({ code: "custom", message: `must be ${what}`, input: text });
          return z.NEVER;
        }
      }),
    ),
    schema,
  );
}
