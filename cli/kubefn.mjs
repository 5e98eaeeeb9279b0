#!/usr/bin/env node
// The `kubefn` command (package.json "bin"): cli/main.ts through tsx, since shared/ uses
// TypeScript that Node's own type stripping refuses (constructor parameter properties).
import { register } from "tsx/esm/api";

register();
const { run } = await import("./main.ts");
await run(process.argv.slice(2));
