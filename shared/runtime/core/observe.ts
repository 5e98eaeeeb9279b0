/**
 * What the core tells the time by and reports through: a clock, a log, metrics. A leaf the
 * other runtime files import (types.ts re-exports it), so that a file the context names — the
 * state changes — can report without importing the context back.
 */

export interface Clock {
  now(): Date;
}

/** The levels a log writes at, least severe first (`LOG_LEVEL` keeps its own and those after it). */
export const logLevels = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof logLevels)[number];

export interface Log {
  /** Detail for chasing a problem; written only at `LOG_LEVEL=debug`, absent from loggers without it. */
  debug?(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface Metrics {
  count(name: string, labels?: Record<string, string>, value?: number): void;
  observe(name: string, value: number, labels?: Record<string, string>): void;
  gauge(name: string, value: number, labels?: Record<string, string>): void;
  /**
   * Removes series of `name` held in memory: the one with exactly `which` labels, or every one
   * `which` picks. Series that name an object (a Proxy's probe gauges) go with the object.
   *
   * Caveats: only a registry that keeps series (the Node host's `/metrics`) has it; data points
   * already written elsewhere (Analytics Engine, CloudWatch) are not taken back, so those platforms
   * omit it.
   */
  forget?(
    name: string,
    which: Record<string, string> | ((labels: Readonly<Record<string, string>>) => boolean),
  ): void;
}
