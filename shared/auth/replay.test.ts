import { describe, expect, it } from "vitest";
import { memoryReplayGuard } from "./replay.ts";

describe("memoryReplayGuard: check and record in one step", () => {
  it("a signature held by one request is pending for the next; confirmed it is a replay until it expires", () => {
    const guard = memoryReplayGuard();
    expect(guard.claim("sig", 100, 0)).toBe("claimed");
    expect(guard.claim("sig", 100, 1)).toBe("pending");
    guard.confirm("sig");
    expect(guard.claim("sig", 100, 2)).toBe("replayed");
    guard.release("sig"); // a confirmed signature stays
    expect(guard.claim("sig", 100, 3)).toBe("replayed");
    expect(guard.claim("sig", 200, 100)).toBe("claimed");
  });

  it("a released claim (the batch was not accepted) may be claimed again", () => {
    const guard = memoryReplayGuard();
    expect(guard.claim("sig", 100, 0)).toBe("claimed");
    guard.release("sig");
    expect(guard.claim("sig", 100, 1)).toBe("claimed");
  });

  it("stays bounded: the oldest is forgotten when full", () => {
    const guard = memoryReplayGuard(2);
    for (const sig of ["a", "b", "c"]) {
      guard.claim(sig, 100, 0);
      guard.confirm(sig);
    }
    expect(guard.claim("a", 100, 1)).toBe("claimed");
    expect(guard.claim("c", 100, 1)).toBe("replayed");
  });
});
