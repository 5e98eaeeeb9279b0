/**
 * Reading the documentation's markdown as GitHub renders it, for the tests that hold the pages to
 * the repository: links and headings (test/unit/docs-links.test.ts) and the shell commands a page
 * tells a reader to run (test/e2e/examples.test.ts).
 */

const fence = /^(```|~~~)([^\n]*)\n([\s\S]*?)^\1[^\n]*$/gm;

/** The page without fenced code blocks (their contents are not markdown). */
export function prose(text: string): string {
  return text.replace(fence, "");
}

/** The bodies of the page's fenced blocks tagged `lang` (e.g. "sh"), in order. */
export function fencedBlocks(text: string, lang: string): string[] {
  return [...text.matchAll(fence)].filter((m) => m[2]!.trim() === lang).map((m) => m[3]!);
}

/** GitHub's anchor for each heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2. */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = m[1]!
      .replace(/`/g, "")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The targets of the page's `[text](target)` links, outside code blocks. */
export function linkTargets(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}
