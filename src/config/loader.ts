// Configuration from command-line flags, ZSTACK_* environment variables and a config file (YAML or JSON, the
// Helm values keys), in that order of precedence over the defaults, for every program of the project. Each
// program lists its settings in one table (key, variable, flag, type, default), so parsing, --help and the docs
// cannot disagree. Every invalid value is reported, each naming where it came from, the bad value and what is
// allowed; loading fails with all of them at once rather than the first.

import { readFileSync } from "node:fs";
import { load as loadYaml } from "js-yaml";
import { formatIp, parseIp } from "../ipam/address.ts";
import { parseCidr } from "../ipam/cidr.ts";
import { parseRemote } from "../ovsdb/transport.ts";

export type Source = "flag" | "env" | "file" | "default";

export type Kind =
  | { type: "enum"; values: readonly string[] }
  | { type: "string" }
  | { type: "int"; min: number; max: number; note?: string }
  | { type: "bool" }
  | { type: "cidrs" }
  | { type: "ip" }
  | { type: "remotes" };

export interface Setting {
  /** Dotted path in the program's configuration and in the config file (the Helm values key). */
  key: string;
  env: string;
  flag: string;
  kind: Kind;
  /** undefined: derived from other settings (documented in `doc`). */
  default: string | number | boolean | undefined;
  doc: string;
}

/** A program's settings and its name in messages. */
export interface Program {
  readonly name: string;
  readonly settings: readonly Setting[];
}

export const PORT = { type: "int", min: 1, max: 65535 } as const;

export const CONFIG_FLAG = "config";
export const CONFIG_ENV = "ZSTACK_CONFIG";

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

export interface LoadOptions {
  /** Command-line arguments without node and script (process.argv.slice(2)). */
  argv?: readonly string[];
  env?: NodeJS.ProcessEnv;
  readFile?: (path: string) => string;
  /** Default identity; os.hostname() unless given. */
  hostname?: string;
}

/** The settings read, before the program derives and cross-checks its own. */
export interface LoadedSettings {
  /** Nested by key, as in the config file. */
  values: Record<string, unknown>;
  /** Where each setting's value came from, by key. */
  sources: Record<string, Source>;
  configFile?: string;
  /** Keys in the config file this program does not read (other Helm values, or typos). */
  warnings: string[];
  /** --help was given. */
  help: boolean;
  problems: string[];
}

type Raw = string | number | boolean;

interface Candidate {
  value: Raw;
  source: Source;
  /** How the value is named in messages: --flag, ENV_VAR or the key. */
  origin: string;
  file?: string;
}

function describe(c: Candidate): string {
  return `${c.origin}=${JSON.stringify(c.value)}${c.file ? ` (in ${c.file})` : ""}`;
}

function allowed(kind: Kind): string {
  switch (kind.type) {
    case "enum":
      return kind.values.length === 2
        ? `must be ${kind.values[0]} or ${kind.values[1]}`
        : `must be one of ${kind.values.join(", ")}`;
    case "int":
      return `must be ${kind.note ?? `an integer from ${kind.min} to ${kind.max}`}`;
    case "bool":
      return "must be true or false";
    case "string":
      return "must be a string";
    case "ip":
      return "must be an IPv4 or IPv6 address such as 192.168.1.10";
    case "cidrs":
      return "must be a CIDR such as 10.244.0.0/16, or an IPv4 and an IPv6 CIDR separated by a comma";
    case "remotes":
      return "must be comma-separated OVSDB remotes: tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH (IPv6 hosts in brackets)";
  }
}

/** Checks and converts one value; returns a problem text (without origin) or the typed value. */
function convert(kind: Kind, raw: Raw): { value: string | number | boolean } | { problem: string } {
  switch (kind.type) {
    case "enum":
      return typeof raw === "string" && kind.values.includes(raw)
        ? { value: raw }
        : { problem: allowed(kind) };
    case "string":
      return typeof raw === "string" ? { value: raw } : { problem: allowed(kind) };
    case "bool": {
      if (typeof raw === "boolean") return { value: raw };
      const t = String(raw).toLowerCase();
      if (["true", "1", "yes"].includes(t)) return { value: true };
      if (["false", "0", "no"].includes(t)) return { value: false };
      return { problem: allowed(kind) };
    }
    case "int": {
      const n = typeof raw === "number" ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(raw) : Number.NaN;
      const inRange = Number.isInteger(n) && n >= kind.min && n <= kind.max;
      // MTU: 0 means "detect", anything else must carry a minimal IPv4 packet.
      const mtuGap = kind.note !== undefined && n > 0 && n < 576;
      return inRange && !mtuGap ? { value: n } : { problem: allowed(kind) };
    }
    case "cidrs": {
      if (typeof raw !== "string") return { problem: allowed(kind) };
      const parts = raw.split(",");
      if (parts.length > 2) return { problem: allowed(kind) };
      const families: number[] = [];
      for (const part of parts) {
        try {
          families.push(parseCidr(part.trim()).family);
        } catch (err) {
          const detail = (err as Error).message.replace(/^[^:]*: /, "");
          return { problem: `${allowed(kind)} (${detail})` };
        }
      }
      if (families.length === 2 && families[0] === families[1])
        return { problem: "two CIDRs must be one IPv4 and one IPv6 (dual stack)" };
      return { value: parts.map((p) => p.trim()).join(",") };
    }
    case "ip": {
      if (typeof raw !== "string") return { problem: allowed(kind) };
      if (raw === "") return { value: "" };
      try {
        return { value: formatIp(parseIp(raw.trim())) };
      } catch (err) {
        const detail = (err as Error).message.replace(/^[^:]*: /, "");
        return { problem: `${allowed(kind)} (${detail})` };
      }
    }
    case "remotes": {
      if (typeof raw !== "string") return { problem: allowed(kind) };
      if (raw === "") return { value: "" };
      for (const part of raw.split(",")) {
        try {
          parseRemote(part.trim());
        } catch {
          return { problem: `${allowed(kind)} ("${part.trim()}" is not one)` };
        }
      }
      return {
        value: raw
          .split(",")
          .map((p) => p.trim())
          .join(","),
      };
    }
  }
}

interface ParsedArgs {
  values: Map<string, Candidate>;
  configFile?: string;
  help: boolean;
  problems: string[];
}

function parseArgs(settings: readonly Setting[], argv: readonly string[]): ParsedArgs {
  const byFlag = new Map(settings.map((s) => [s.flag, s]));
  const out: ParsedArgs = { values: new Map(), help: false, problems: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "-h" || arg === "--help") {
      out.help = true;
      continue;
    }
    if (!arg.startsWith("--")) {
      out.problems.push(`unexpected argument ${JSON.stringify(arg)}: settings are given as --flag=value`);
      continue;
    }
    const eq = arg.indexOf("=");
    let name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    let value: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined;
    let setting = byFlag.get(name);
    if (!setting && name.startsWith("no-") && value === undefined) {
      const positive = byFlag.get(name.slice(3));
      if (positive?.kind.type === "bool") {
        setting = positive;
        name = positive.flag;
        value = "false";
      }
    }
    if (name === CONFIG_FLAG) {
      const file = value ?? argv[++i];
      if (file === undefined) out.problems.push("--config needs a file path");
      else out.configFile = file;
      continue;
    }
    if (!setting) {
      out.problems.push(`unknown flag --${name} (see --help)`);
      continue;
    }
    if (value === undefined) {
      const next = argv[i + 1];
      if (setting.kind.type === "bool" && (next === undefined || next.startsWith("--"))) value = "true";
      else if (next === undefined) {
        out.problems.push(`--${name} needs a value`);
        continue;
      } else {
        value = next;
        i++;
      }
    }
    out.values.set(setting.key, { value, source: "flag", origin: `--${name}` });
  }
  return out;
}

/** Flattens the config file's nested keys to dotted ones; unknown leaves become warnings. */
function flattenFile(
  program: Program,
  doc: unknown,
  file: string,
  values: Map<string, Candidate>,
  warnings: string[],
  problems: string[],
): void {
  const known = new Set(program.settings.map((s) => s.key));
  const prefixes = new Set(
    program.settings.flatMap((s) => s.key.split(".").map((_, i, parts) => parts.slice(0, i).join("."))),
  );
  const walk = (node: unknown, path: string) => {
    if (known.has(path)) {
      if (typeof node === "string" || typeof node === "number" || typeof node === "boolean") {
        values.set(path, { value: node, source: "file", origin: path, file });
      } else if (node !== null && node !== undefined) {
        const setting = program.settings.find((s) => s.key === path) as Setting;
        problems.push(`${path} in ${file}: ${allowed(setting.kind)}`);
      }
      return;
    }
    if (
      node !== null &&
      typeof node === "object" &&
      !Array.isArray(node) &&
      (path === "" || prefixes.has(path))
    ) {
      for (const [k, v] of Object.entries(node)) walk(v, path ? `${path}.${k}` : k);
      return;
    }
    warnings.push(`${file}: ignoring ${path}, which ${program.name} does not read`);
  };
  if (doc === null || doc === undefined) return;
  if (typeof doc !== "object" || Array.isArray(doc)) {
    problems.push(`${file}: must hold a mapping of settings (ovn:, network:, ...)`);
    return;
  }
  walk(doc, "");
}

function setPath(target: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split(".");
  let node = target;
  for (const p of parts.slice(0, -1)) {
    node[p] ??= {};
    node = node[p] as Record<string, unknown>;
  }
  node[parts.at(-1) as string] = value;
}

/** Reads every setting of `program` from flags, environment and config file; collects every problem. */
export function loadSettings(program: Program, opts: LoadOptions = {}): LoadedSettings {
  const env = opts.env ?? process.env;
  const args = parseArgs(program.settings, opts.argv ?? []);
  const problems = [...args.problems];
  const warnings: string[] = [];

  const fromFile = new Map<string, Candidate>();
  const configFile = args.configFile ?? (env[CONFIG_ENV] || undefined);
  if (configFile) {
    let text: string | undefined;
    try {
      text = (opts.readFile ?? ((p) => readFileSync(p, "utf8")))(configFile);
    } catch (err) {
      problems.push(`config file ${configFile}: ${(err as Error).message}`);
    }
    if (text !== undefined) {
      try {
        // YAML is a superset of JSON, so one parser reads both.
        flattenFile(program, loadYaml(text), configFile, fromFile, warnings, problems);
      } catch (err) {
        problems.push(
          `config file ${configFile} is not valid YAML or JSON: ${(err as Error).message.split("\n")[0]}`,
        );
      }
    }
  }

  const values: Record<string, unknown> = {};
  const sources: Record<string, Source> = {};
  for (const s of program.settings) {
    const envValue = env[s.env];
    const candidate =
      args.values.get(s.key) ??
      (envValue !== undefined && envValue !== ""
        ? { value: envValue, source: "env" as const, origin: s.env }
        : fromFile.get(s.key));
    if (candidate) {
      const result = convert(s.kind, candidate.value);
      if ("problem" in result) problems.push(`${describe(candidate)}: ${result.problem}`);
      else setPath(values, s.key, result.value);
      sources[s.key] = candidate.source;
    } else {
      if (s.default !== undefined) setPath(values, s.key, s.default);
      sources[s.key] = "default";
    }
  }
  return { values, sources, ...(configFile ? { configFile } : {}), warnings, help: args.help, problems };
}

/** How a setting is named in cross-check messages: its key, variable and flag. */
export function settingName(program: Program, key: string): string {
  const s = program.settings.find((x) => x.key === key);
  if (!s) throw new Error(`${program.name} has no setting ${key}`);
  return `${key} (${s.env}, --${s.flag})`;
}

/** --help text: every flag with its variable and default. */
export function settingsHelp(program: Program): string {
  const lines = [
    `Usage: ${program.name} [--config FILE] [--flag=value ...]`,
    "",
    "Precedence: flags > environment variables > config file (YAML or JSON, Helm values keys) > defaults.",
    `  --config FILE  (${CONFIG_ENV})`,
    "",
  ];
  for (const s of program.settings) {
    const def = s.default === undefined ? "derived" : JSON.stringify(s.default);
    lines.push(`  --${s.flag}  (${s.env}; ${s.key}; default ${def})`);
    lines.push(`      ${s.doc}`);
  }
  return `${lines.join("\n")}\n`;
}
