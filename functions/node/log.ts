import type { Log } from "../../shared/runtime/types.ts";

/**
 * A line logger for the Node host: `time level message key=value …` for people, or one JSON
 * object per line for machines.
 *
 * In text, a value with whitespace, quotes, `=` or control characters is written JSON-quoted, and
 * control characters in the message are escaped: whatever a tenant put in a name, URL or error
 * cannot start a new line that reads like another log entry.
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
      .map(([k, v]) => `${escapeControls(k)}=${textValue(v)}`)
      .join(" ");
    write(`${time.slice(11, 19)} ${level.padEnd(5)} ${escapeControls(msg)}${kv ? ` ${kv}` : ""}`);
  };
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

const plain = /^[^\s"=\\\p{Cc}]+$/u;

function textValue(v: unknown): string {
  if (typeof v === "string" && plain.test(v)) return v;
  return JSON.stringify(v) ?? String(v);
}

function escapeControls(text: string): string {
  return text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));
}
