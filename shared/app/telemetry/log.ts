import { type Log, type LogLevel, logLevels } from "../../runtime/index.ts";

/**
 * A line logger: `time level message key=value …` for people, or one JSON object per line for
 * machines (Workers Logs, CloudWatch Logs Insights and Loki index the fields). `write` gets
 * every line with its level; the default writes all of them to stdout, in order. `level`
 * (`LOG_LEVEL`, default info) drops the lines below it before anything is formatted.
 *
 * In text, a value with whitespace, quotes, `=` or control characters is written JSON-quoted, and
 * control characters in the message are escaped: whatever a tenant put in a name, URL or error
 * cannot start a new line that reads like another log entry.
 */
export function createLineLog(
  format: "text" | "json",
  write: (line: string, level: LogLevel) => void = (line) => console.log(line),
  level: LogLevel = "info",
): Log {
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
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
  const least = logLevels.indexOf(level);
  const at = (l: LogLevel) =>
    logLevels.indexOf(l) >= least ? (m: string, f?: Record<string, unknown>) => emit(l, m, f) : () => {};
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** One JSON object per line on the console, errors on stderr (the serverless platforms' log). */
export const createJsonLog = (level: LogLevel = "info"): Log =>
  createLineLog("json", (line, l) => (l === "error" ? console.error : console.log)(line), level);

const plain = /^[^\s"=\\\p{Cc}]+$/u;

function textValue(v: unknown): string {
  if (typeof v === "string" && plain.test(v)) return v;
  return JSON.stringify(v) ?? String(v);
}

function escapeControls(text: string): string {
  return text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));
}
