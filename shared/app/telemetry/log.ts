import type { Log } from "../../runtime/index.ts";

/**
 * A line logger: `time level message key=value …` for people, or one JSON object per line for
 * machines (Workers Logs, CloudWatch Logs Insights and Loki index the fields). `write` gets
 * every line with its level; the default writes all of them to stdout, in order.
 *
 * In text, a value with whitespace, quotes, `=` or control characters is written JSON-quoted, and
 * control characters in the message are escaped: whatever a tenant put in a name, URL or error
 * cannot start a new line that reads like another log entry.
 */
export function createLineLog(
  format: "text" | "json",
  write: (line: string, level: string) => void = (line) => console.log(line),
): Log {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) => {
    const out = (line: string) => write(line, level);
    const time = new Date().toISOString();
    if (format === "json") {
      out(JSON.stringify({ time, level, msg, ...fields }));
      return;
    }
    const kv = Object.entries(fields ?? {})
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${escapeControls(k)}=${textValue(v)}`)
      .join(" ");
    out(`${time.slice(11, 19)} ${level.padEnd(5)} ${escapeControls(msg)}${kv ? ` ${kv}` : ""}`);
  };
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/** One JSON object per line on the console, errors on stderr (the serverless platforms' log). */
export const createJsonLog = (): Log =>
  createLineLog("json", (line, level) => (level === "error" ? console.error : console.log)(line));

const plain = /^[^\s"=\\\p{Cc}]+$/u;

function textValue(v: unknown): string {
  if (typeof v === "string" && plain.test(v)) return v;
  return JSON.stringify(v) ?? String(v);
}

function escapeControls(text: string): string {
  return text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));
}
