import { describe, expect, it } from "vitest";
import type { LogLevel } from "../../runtime/index.ts";
import { createLineLog } from "./index.ts";

/** Writes one line at every level through a log built at `level`; returns the levels written. */
function written(level: LogLevel, format: "text" | "json"): string[] {
  const out: string[] = [];
  const log = createLineLog(format, (_line, l) => out.push(l), level);
  log.debug?.("d", { k: 1 });
  log.info("i");
  log.warn("w");
  log.error("e");
  return out;
}

describe("LOG_LEVEL keeps its own level and the more severe ones", () => {
  it.each([
    ["debug", ["debug", "info", "warn", "error"]],
    ["info", ["info", "warn", "error"]],
    ["warn", ["warn", "error"]],
    ["error", ["error"]],
  ] as const)("at %s: %j", (level, expected) => {
    expect(written(level, "text")).toEqual(expected);
    expect(written(level, "json")).toEqual(expected);
  });

  it("defaults to info: debug lines are dropped", () => {
    const out: string[] = [];
    const log = createLineLog("json", (line) => out.push(line));
    log.debug?.("hidden");
    log.info("shown");
    expect(out.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(["shown"]);
  });

  it("a debug line is written with its level and fields", () => {
    const out: string[] = [];
    createLineLog("json", (line) => out.push(line), "debug").debug?.("stale message dropped", {
      key: "proxy/a/b",
    });
    expect(JSON.parse(out[0]!)).toMatchObject({
      level: "debug",
      msg: "stale message dropped",
      key: "proxy/a/b",
    });
  });
});
