import * as z from "../zod/index.ts";

/** A comma-separated list, trimmed, empties dropped. */
export const commaList = z.pipe(
  z.string(),
  z.transform((s) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  ),
);
