/**
 * zod as kubefn uses it: `zod/mini` (functions instead of methods, so that the Worker bundle
 * keeps only the validators it calls), with zod's English messages, which classic zod
 * installs by itself and mini does not. shared/ and functions/ import zod only through this
 * module (infra/relay, on Node only, uses classic zod).
 */
import * as z from "zod/mini";
import en from "zod/v4/locales/en.js";

z.config(en());

export * from "zod/mini";
