import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { settingsDoc, settingsDocPath } from "../../scripts/gen-settings-doc.ts";

describe("docs/settings.md", () => {
  it("is what npm run gen:docs writes from the settings schema", () => {
    const committed = readFileSync(settingsDocPath, "utf8");
    // On failure: run `npm run gen:docs` and commit docs/settings.md.
    expect(committed).toBe(settingsDoc());
  });
});
