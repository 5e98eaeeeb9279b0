/**
 * The documentation's relative links resolve: every `[text](target)` in README.md and docs/ names
 * a file that exists and, when it names an anchor in a markdown page, a heading of that page (as
 * GitHub spells heading anchors). Also every repository path quoted as inline code
 * (`shared/…`, `functions/…`, `test/…`, …) exists, so a moved file is found in the pages that name it.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { fencedBlocks, headingAnchors, linkTargets, prose } from "../support/markdown.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));

function markdownPages(): string[] {
  const docs = readdirSync(join(root, "docs"), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".md"))
    .map((e) => relative(root, join(e.parentPath, e.name)));
  return ["README.md", "infra/aws/README.md", ...docs.sort()];
}

/** Inline code that is a repository path: starts with a top-level folder, no spaces or placeholders. */
function quotedPaths(text: string): string[] {
  const top = /^(shared|functions|infra|test|scripts|examples|docs)\/[\w./-]*$/;
  return [...prose(text).matchAll(/`([^`\n]+)`/g)]
    .map((m) => m[1]!)
    .filter((s) => top.test(s) && !s.includes("*") && !s.includes(".."));
}

describe("the documentation's links", () => {
  const pages = markdownPages();

  it("covers the README, docs/ and its index", () => {
    expect(pages).toContain("docs/README.md");
    expect(pages.length).toBeGreaterThan(10);
  });

  it.each(pages)("%s: every relative link names an existing file and heading", (page) => {
    const text = readFileSync(join(root, page), "utf8");
    const broken: string[] = [];
    for (const link of linkTargets(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // http:, https:, mailto:
      const [path = "", anchor] = link.split("#", 2);
      const target = path === "" ? join(root, page) : join(root, dirname(page), path);
      if (!existsSync(target)) {
        broken.push(`${link}: no such file`);
        continue;
      }
      if (anchor === undefined) continue;
      if (statSync(target).isDirectory() || !target.endsWith(".md")) {
        broken.push(`${link}: an anchor into something that is not a markdown page`);
        continue;
      }
      if (!headingAnchors(readFileSync(target, "utf8")).has(anchor)) broken.push(`${link}: no such heading`);
    }
    expect(broken).toEqual([]);
  });

  it.each(pages)("%s: every repository path quoted as code exists", (page) => {
    const text = readFileSync(join(root, page), "utf8");
    const missing = quotedPaths(text).filter((p) => !existsSync(join(root, p)));
    expect(missing).toEqual([]);
  });

  it.each(pages)("%s: every repository path in a shell block exists", (page) => {
    const text = readFileSync(join(root, page), "utf8");
    const top = /^(shared|functions|infra|test|scripts|examples|docs)\/[\w./-]*$/;
    const words = fencedBlocks(text, "sh").flatMap((b) => b.split(/[\s"'=]+/));
    // The devcluster's binary is built by npm start (scripts/build-devcluster.sh), not committed.
    const built = (w: string) => w.startsWith("infra/devcluster/bin/");
    const missing = words.filter((w) => top.test(w) && !built(w) && !existsSync(join(root, w)));
    expect(missing).toEqual([]);
  });

  it("can fail: a link to a missing page and a missing heading are both caught", () => {
    expect(headingAnchors("# A page\n## Two words, one `code`\n## Two words, one code\n")).toEqual(
      new Set(["a-page", "two-words-one-code", "two-words-one-code-1"]),
    );
    expect(linkTargets("see [x](nowhere.md#a) and\n```\n[y](in-code.md)\n```\n")).toEqual(["nowhere.md#a"]);
  });
});
