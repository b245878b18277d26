// Configuration of zstack-ovnkube-controller from command-line flags, ZSTACK_* environment variables and a
// config file (YAML or JSON, the Helm values keys), in that order of precedence over the defaults. One table
// lists every setting with its key, variable, flag, type and default, so parsing, --help and
// docs/configuration.md cannot disagree. Every invalid value is reported, each naming where it came from,
// the bad value and what is allowed; loading fails with all of them at once rather than the first.

import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { load as loadYaml } from "js-yaml";
import { overlaps, parseCidr } from "../ipam/cidr.ts";
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from "../observability/log.ts";
import { parseRemote } from "../ovsdb/transport.ts";

export type OvnMode = "standalone" | "external";
export type GatewayMode = "local" | "shared";
export type TunnelType = "vxlan" | "geneve";

export interface ControllerConfig {
  ovn: {
    mode: OvnMode;
    /** OVS remote list, e.g. "ssl:10.0.0.1:6641,ssl:10.0.0.2:6641"; required in external mode. */
    nbdbAddress: string;
    sbdbAddress: string;
    ssl: { enabled: boolean; verifyHostname: boolean; caCert: string; clientCert: string; clientKey: string };
  };
  network: {
    /** One CIDR, or an IPv4 and an IPv6 one separated by a comma. */
    clusterCIDR: string;
    serviceCIDR: string;
    joinCIDR: string;
    nodeSubnetSize: number;
    /** 0: detect from the node's uplink. */
    mtu: number;
  };
  gateway: { mode: GatewayMode; interface: string };
  tunnel: { type: TunnelType; port: number };
  logging: { level: LogLevel; format: LogFormat };
  kubernetes: {
    /** Empty: the in-cluster service account. */
    kubeconfig: string;
  };
  controller: {
    workers: number;
    /** Serves /healthz, /readyz and /metrics. */
    metricsPort: number;
    leaderElect: boolean;
    leaseNamespace: string;
    leaseName: string;
    /** This replica's name in the Lease; the pod name. */
    identity: string;
  };
}

export type Source = "flag" | "env" | "file" | "default";

type Kind =
  | { type: "enum"; values: readonly string[] }
  | { type: "string" }
  | { type: "int"; min: number; max: number; note?: string }
  | { type: "bool" }
  | { type: "cidrs" }
  | { type: "remotes" };

export interface Setting {
  /** Dotted path in ControllerConfig and in the config file (the Helm values key). */
  key: string;
  env: string;
  flag: string;
  kind: Kind;
  /** undefined: derived from other settings (documented in `doc`). */
  default: string | number | boolean | undefined;
  doc: string;
}

const PORT = { type: "int", min: 1, max: 65535 } as const;

export const CONTROLLER_SETTINGS: readonly Setting[] = [
  {
    key: "ovn.mode",
    env: "ZSTACK_OVN_MODE",
    flag: "ovn-mode",
    kind: { type: "enum", values: ["standalone", "external"] },
    default: "standalone",
    doc: "standalone: the chart runs OVN central; external: use the NB/SB of an existing OVN (ZStack).",
  },
  {
    key: "ovn.nbdbAddress",
    env: "ZSTACK_OVN_NBDB_ADDRESS",
    flag: "nbdb-address",
    kind: { type: "remotes" },
    default: "",
    doc: "Northbound DB remotes, comma-separated tcp:HOST:PORT, ssl:HOST:PORT or unix:PATH. Required in external mode.",
  },
  {
    key: "ovn.sbdbAddress",
    env: "ZSTACK_OVN_SBDB_ADDRESS",
    flag: "sbdb-address",
    kind: { type: "remotes" },
    default: "",
    doc: "Southbound DB remotes, same form. Required in external mode.",
  },
  {
    key: "ovn.ssl.enabled",
    env: "ZSTACK_OVN_SSL_ENABLED",
    flag: "ovn-ssl",
    kind: { type: "bool" },
    default: false,
    doc: "Use TLS (ssl: remotes) with the three files below.",
  },
  {
    key: "ovn.ssl.verifyHostname",
    env: "ZSTACK_OVN_SSL_VERIFY_HOSTNAME",
    flag: "ovn-ssl-verify-hostname",
    kind: { type: "bool" },
    default: false,
    doc: "Also check the ssl: remote's host name against its certificate. OVS itself checks only that the certificate chains to the CA (ovs-pki certificates name no host); turn this on when the certificates carry the names or addresses the remotes use.",
  },
  {
    key: "ovn.ssl.caCert",
    env: "ZSTACK_OVN_SSL_CA",
    flag: "ovn-ssl-ca",
    kind: { type: "string" },
    default: "",
    doc: "CA certificate file that signed the OVN servers' certificates.",
  },
  {
    key: "ovn.ssl.clientCert",
    env: "ZSTACK_OVN_SSL_CERT",
    flag: "ovn-ssl-cert",
    kind: { type: "string" },
    default: "",
    doc: "Client certificate file.",
  },
  {
    key: "ovn.ssl.clientKey",
    env: "ZSTACK_OVN_SSL_KEY",
    flag: "ovn-ssl-key",
    kind: { type: "string" },
    default: "",
    doc: "Client private key file.",
  },
  {
    key: "network.clusterCIDR",
    env: "ZSTACK_CLUSTER_CIDR",
    flag: "cluster-cidr",
    kind: { type: "cidrs" },
    default: "10.244.0.0/16",
    doc: "Pod network; an IPv4 and an IPv6 CIDR separated by a comma for dual stack.",
  },
  {
    key: "network.serviceCIDR",
    env: "ZSTACK_SERVICE_CIDR",
    flag: "service-cidr",
    kind: { type: "cidrs" },
    default: "10.96.0.0/16",
    doc: "Service network; must match kube-apiserver's --service-cluster-ip-range.",
  },
  {
    key: "network.joinCIDR",
    env: "ZSTACK_JOIN_CIDR",
    flag: "join-cidr",
    kind: { type: "cidrs" },
    default: "100.64.0.0/16",
    doc: "Join network between the cluster router and the nodes' management ports.",
  },
  {
    key: "network.nodeSubnetSize",
    env: "ZSTACK_NODE_SUBNET_SIZE",
    flag: "node-subnet-size",
    kind: { type: "int", min: 8, max: 30 },
    default: 24,
    doc: "IPv4 prefix length of a per-node pod subnet.",
  },
  {
    key: "network.mtu",
    env: "ZSTACK_MTU",
    flag: "mtu",
    kind: { type: "int", min: 0, max: 9000, note: "0 (detect) or an integer from 576 to 9000" },
    default: 0,
    doc: "Pod interface MTU; 0 detects it from the uplink minus the tunnel overhead.",
  },
  {
    key: "gateway.mode",
    env: "ZSTACK_GATEWAY_MODE",
    flag: "gateway-mode",
    kind: { type: "enum", values: ["local", "shared"] },
    default: "local",
    doc: "local: egress through the node's kernel; shared: through OVS on the node's uplink.",
  },
  {
    key: "gateway.interface",
    env: "ZSTACK_GATEWAY_INTERFACE",
    flag: "gateway-interface",
    kind: { type: "string" },
    default: "",
    doc: "Uplink for shared mode; empty: the interface of the default route.",
  },
  {
    key: "tunnel.type",
    env: "ZSTACK_TUNNEL_TYPE",
    flag: "tunnel-type",
    kind: { type: "enum", values: ["vxlan", "geneve"] },
    default: "vxlan",
    doc: "Overlay encapsulation between nodes.",
  },
  {
    key: "tunnel.port",
    env: "ZSTACK_TUNNEL_PORT",
    flag: "tunnel-port",
    kind: PORT,
    default: undefined,
    doc: "UDP port of the tunnel; default 4789 for vxlan, 6081 for geneve.",
  },
  {
    key: "logging.level",
    env: "ZSTACK_LOG_LEVEL",
    flag: "log-level",
    kind: { type: "enum", values: LOG_LEVELS },
    default: "info",
    doc: "Least severe level logged.",
  },
  {
    key: "logging.format",
    env: "ZSTACK_LOG_FORMAT",
    flag: "log-format",
    kind: { type: "enum", values: LOG_FORMATS },
    default: "json",
    doc: "json: one JSON object per line; text: one readable line.",
  },
  {
    key: "kubernetes.kubeconfig",
    env: "ZSTACK_KUBECONFIG",
    flag: "kubeconfig",
    kind: { type: "string" },
    default: "",
    doc: "Kubeconfig file; empty: the pod's service account (in-cluster).",
  },
  {
    key: "controller.workers",
    env: "ZSTACK_WORKERS",
    flag: "workers",
    kind: { type: "int", min: 1, max: 64 },
    default: 4,
    doc: "Reconcile workers of the pods queue, and as many of the pod-annotations queue.",
  },
  {
    key: "controller.metricsPort",
    env: "ZSTACK_METRICS_PORT",
    flag: "metrics-port",
    kind: PORT,
    default: 10660,
    doc: "Port of /healthz, /readyz and /metrics.",
  },
  {
    key: "controller.leaderElect",
    env: "ZSTACK_LEADER_ELECT",
    flag: "leader-elect",
    kind: { type: "bool" },
    default: true,
    doc: "Elect one active replica through a Lease; turn off only with a single replica.",
  },
  {
    key: "controller.leaseNamespace",
    env: "ZSTACK_LEASE_NAMESPACE",
    flag: "lease-namespace",
    kind: { type: "string" },
    default: "kube-system",
    doc: "Namespace of the leader-election Lease.",
  },
  {
    key: "controller.leaseName",
    env: "ZSTACK_LEASE_NAME",
    flag: "lease-name",
    kind: { type: "string" },
    default: "zstack-ovnkube-controller",
    doc: "Name of the leader-election Lease.",
  },
  {
    key: "controller.identity",
    env: "ZSTACK_POD_NAME",
    flag: "identity",
    kind: { type: "string" },
    default: undefined,
    doc: "This replica's identity in the Lease; default the host name (the pod name in a pod).",
  },
];

const CONFIG_FLAG = "config";
const CONFIG_ENV = "ZSTACK_CONFIG";

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

export interface LoadedConfig {
  config: ControllerConfig;
  /** Where each setting's value came from, by key. */
  sources: Record<string, Source>;
  configFile?: string;
  /** Keys in the config file this program does not read (other Helm values, or typos). */
  warnings: string[];
  /** --help was given: print controllerConfigHelp() and exit. */
  help: boolean;
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

function parseArgs(argv: readonly string[]): ParsedArgs {
  const byFlag = new Map(CONTROLLER_SETTINGS.map((s) => [s.flag, s]));
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
  doc: unknown,
  file: string,
  values: Map<string, Candidate>,
  warnings: string[],
  problems: string[],
): void {
  const known = new Set(CONTROLLER_SETTINGS.map((s) => s.key));
  const prefixes = new Set(
    CONTROLLER_SETTINGS.flatMap((s) => s.key.split(".").map((_, i, parts) => parts.slice(0, i).join("."))),
  );
  const walk = (node: unknown, path: string) => {
    if (known.has(path)) {
      if (typeof node === "string" || typeof node === "number" || typeof node === "boolean") {
        values.set(path, { value: node, source: "file", origin: path, file });
      } else if (node !== null && node !== undefined) {
        const setting = CONTROLLER_SETTINGS.find((s) => s.key === path) as Setting;
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
    warnings.push(`${file}: ignoring ${path}, which zstack-ovnkube-controller does not read`);
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

export function loadControllerConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const args = parseArgs(opts.argv ?? []);
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
        flattenFile(loadYaml(text), configFile, fromFile, warnings, problems);
      } catch (err) {
        problems.push(
          `config file ${configFile} is not valid YAML or JSON: ${(err as Error).message.split("\n")[0]}`,
        );
      }
    }
  }

  const config: Record<string, unknown> = {};
  const sources: Record<string, Source> = {};
  for (const s of CONTROLLER_SETTINGS) {
    const envValue = env[s.env];
    const candidate =
      args.values.get(s.key) ??
      (envValue !== undefined && envValue !== ""
        ? { value: envValue, source: "env" as const, origin: s.env }
        : fromFile.get(s.key));
    if (candidate) {
      const result = convert(s.kind, candidate.value);
      if ("problem" in result) problems.push(`${describe(candidate)}: ${result.problem}`);
      else setPath(config, s.key, result.value);
      sources[s.key] = candidate.source;
    } else {
      if (s.default !== undefined) setPath(config, s.key, s.default);
      sources[s.key] = "default";
    }
  }
  const c = config as unknown as ControllerConfig;
  if (problems.length === 0) {
    c.tunnel.port ??= c.tunnel.type === "geneve" ? 6081 : 4789;
    c.controller.identity ??= opts.hostname ?? hostname();
    problems.push(...crossCheck(c));
  }
  if (problems.length > 0 && !args.help) throw new ConfigError(problems);
  return { config: c, sources, ...(configFile ? { configFile } : {}), warnings, help: args.help };
}

function crossCheck(c: ControllerConfig): string[] {
  const problems: string[] = [];
  const name = (key: string) => {
    const s = CONTROLLER_SETTINGS.find((x) => x.key === key) as Setting;
    return `${key} (${s.env}, --${s.flag})`;
  };
  // Accepted by the schema (seed §8) so that values files keep their shape, refused until they are built: a
  // setting that is silently ignored is worse than one that stops the controller with the reason.
  if (c.ovn.mode === "external")
    problems.push(
      `${name("ovn.mode")}=external is not supported yet: this release runs only with OVN databases of its own; set it to standalone`,
    );
  if (c.gateway.mode === "shared")
    problems.push(
      `${name("gateway.mode")}=shared is not supported yet: pod egress goes through the node's kernel; set it to local`,
    );
  const remotes = [c.ovn.nbdbAddress, c.ovn.sbdbAddress].flatMap((r) => (r ? r.split(",") : []));
  if (c.ovn.ssl.enabled) {
    for (const key of ["ovn.ssl.caCert", "ovn.ssl.clientCert", "ovn.ssl.clientKey"] as const) {
      const field = key.split(".")[2] as "caCert" | "clientCert" | "clientKey";
      if (!c.ovn.ssl[field]) problems.push(`ovn.ssl.enabled=true needs ${name(key)}`);
    }
  } else if (remotes.some((r) => r.startsWith("ssl:"))) {
    problems.push(`ssl: remotes need ${name("ovn.ssl.enabled")}=true and its certificate files`);
  }
  const nets = [
    ["network.clusterCIDR", c.network.clusterCIDR],
    ["network.serviceCIDR", c.network.serviceCIDR],
    ["network.joinCIDR", c.network.joinCIDR],
  ] as const;
  for (let i = 0; i < nets.length; i++) {
    for (let j = i + 1; j < nets.length; j++) {
      const [ka, va] = nets[i] as (typeof nets)[number];
      const [kb, vb] = nets[j] as (typeof nets)[number];
      for (const a of va.split(",")) {
        for (const b of vb.split(",")) {
          if (overlaps(a, b)) problems.push(`${ka}=${a} overlaps ${kb}=${b}: the networks must be disjoint`);
        }
      }
    }
  }
  const v4 = c.network.clusterCIDR.split(",").find((x) => !x.includes(":"));
  if (v4) {
    const prefix = Number(v4.split("/")[1]);
    if (c.network.nodeSubnetSize <= prefix)
      problems.push(
        `network.nodeSubnetSize=${c.network.nodeSubnetSize} must be longer than the clusterCIDR prefix /${prefix}, so the cluster network holds several node subnets`,
      );
  }
  return problems;
}

/** --help text: every flag with its variable and default. */
export function controllerConfigHelp(): string {
  const lines = [
    "Usage: zstack-ovnkube-controller [--config FILE] [--flag=value ...]",
    "",
    "Precedence: flags > environment variables > config file (YAML or JSON, Helm values keys) > defaults.",
    `  --config FILE  (${CONFIG_ENV})`,
    "",
  ];
  for (const s of CONTROLLER_SETTINGS) {
    const def = s.default === undefined ? "derived" : JSON.stringify(s.default);
    lines.push(`  --${s.flag}  (${s.env}; ${s.key}; default ${def})`);
    lines.push(`      ${s.doc}`);
  }
  return `${lines.join("\n")}\n`;
}
