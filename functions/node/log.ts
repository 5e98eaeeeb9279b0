import type { Log } from "../../shared/runtime/types.ts";

/**
 * A line logger for the Node host: `time level message key=value …` for people, or one JSON
 * object per line for machines.
 */
export function createLineLog(format: "text" | "json", write: (line: string) => void = console.log): Log {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) => {
    const time = new Date().toISOString();
    if (format === "json") {
      write(JSON.stringify({ time, level, msg, ...fields }));
      return;
    }
    const kv = Object.entries(fields ?? {})
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join(" ");
    write(`${time.slice(11, 19)} ${level.padEnd(5)} ${msg}${kv ? ` ${kv}` : ""}`);
  };
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}
