// Structured logging for the controller and the node agent: pino, writing JSON lines (for log collectors) or
// one readable line per record (for people), at a configured level.

import { pino } from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFormat = "json" | "text";
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];
export const LOG_FORMATS: readonly LogFormat[] = ["json", "text"];

/**
 * What library modules (informer, workqueue, leader election...) log through. pino's Logger fits it, and a
 * test can pass a recorder; modules default to silentLogger so they never need a logger to work.
 */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};

export interface LoggerOptions {
  level?: LogLevel;
  format?: LogFormat;
  /** Added to every record as `component`. */
  component?: string;
  /** Where lines go; stdout by default. Anything with write(string). */
  destination?: { write(line: string): unknown };
}

const LEVEL_NAMES: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};
// Fields that the text line shows in its fixed part, so they are not repeated as key=value.
const FIXED_FIELDS = new Set(["level", "time", "msg", "pid", "hostname", "component"]);

function textValue(v: unknown): string {
  if (typeof v === "string") return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/** Turns one pino JSON line into `2026-01-02T03:04:05.678Z INFO  component: message key=value ...`. */
export function formatTextLine(jsonLine: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(jsonLine) as Record<string, unknown>;
  } catch {
    return jsonLine.endsWith("\n") ? jsonLine : `${jsonLine}\n`;
  }
  const time = typeof rec.time === "number" ? new Date(rec.time).toISOString() : String(rec.time ?? "");
  const level = (
    typeof rec.level === "string" ? rec.level.toUpperCase() : (LEVEL_NAMES[Number(rec.level)] ?? "?")
  ).padEnd(5);
  const component = typeof rec.component === "string" ? `${rec.component}: ` : "";
  const fields: string[] = [];
  for (const [k, v] of Object.entries(rec)) {
    if (FIXED_FIELDS.has(k) || v === undefined) continue;
    if (k === "err" && v && typeof v === "object" && "message" in v) {
      fields.push(`err=${textValue((v as { message: unknown }).message)}`);
      continue;
    }
    fields.push(`${k}=${textValue(v)}`);
  }
  const msg = typeof rec.msg === "string" ? rec.msg : "";
  return `${time} ${level} ${component}${msg}${fields.length > 0 ? ` ${fields.join(" ")}` : ""}\n`;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const out = opts.destination ?? process.stdout;
  const destination =
    opts.format === "text" ? { write: (line: string) => out.write(formatTextLine(line)) } : out;
  return pino(
    {
      level: opts.level ?? "info",
      base: opts.component ? { component: opts.component } : {},
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  ) as unknown as Logger;
}
