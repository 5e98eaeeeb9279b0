import { describe, expect, it } from "vitest";
import { createLineLog } from "./index.ts";

describe("createLineLog text format", () => {
  it("a tenant-controlled value cannot forge a second log line", () => {
    const lines: string[] = [];
    const log = createLineLog("text", (l) => lines.push(l));
    log.error("pass failed\nfake", {
      name: "evil\n12:00:00 info  pass key=proxy/default/ok result=done",
      url: "http://x/ a=b",
      plain: "proxy/default/p1",
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain("\n");
    expect(lines[0]).toContain("pass failed\\nfake");
    expect(lines[0]).toContain('name="evil\\n12:00:00 info  pass key=proxy/default/ok result=done"');
    expect(lines[0]).toContain('url="http://x/ a=b"');
    expect(lines[0]).toContain("plain=proxy/default/p1");
  });
});
