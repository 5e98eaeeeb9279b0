/**
 * zod as kubefn uses it: `zod/mini` (functions instead of methods, so that the Worker bundle
 * keeps only the validators it calls), with English messages in zod's own wording (messages.ts),
 * which classic zod installs by itself and mini does not. shared/ and functions/ import zod only
 * through this module (infra/relay, on Node only, uses classic zod).
 */
import * as z from "zod/mini";
import { _coercedNumber, _isoDateTime } from "zod/v4/core";
import { englishMessage } from "./messages.ts";

z.config({ localeError: englishMessage });

export * from "zod/mini";

// zod's `iso` and `coerce` are namespace objects: using one member keeps all of them, and their
// schema classes (dates, durations, bigints), in the bundle. These keep only what kubefn uses;
// they shadow the namespaces of the `export *` above.

/** `z.iso`, only `datetime`. */
export const iso = {
  datetime: (params?: Parameters<typeof z.iso.datetime>[0]) => _isoDateTime(z.ZodMiniISODateTime, params),
};

/** `z.coerce`, only `number`. */
export const coerce = {
  number: (params?: Parameters<typeof z.coerce.number>[0]) => _coercedNumber(z.ZodMiniNumber, params),
};
