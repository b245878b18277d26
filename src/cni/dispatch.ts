// The plugin skeleton: one CNI invocation (environment + stdin) in, the exit code and stdout out.
// It owns the order of checks, version negotiation, the per-command rules and error JSON, so handlers
// only see valid typed requests and only ever throw.

import { asCniError, CniError, CniErrorCode, formatCniError } from "./error.ts";
import type { CniHandler, CniRequest } from "./handler.ts";
import type { AgentReply, AgentRequest } from "./protocol.ts";
import { formatResult } from "./result.ts";
import {
  type CniCommand,
  type CniVersion,
  COMMAND_SINCE,
  configVersion,
  decodeConfig,
  parseCniCommand,
  parseCniEnv,
  parsePluginConfig,
  replyVersion,
  versionAtLeast,
  versionReply,
} from "./spec.ts";

/** What happened, for the request log and metrics. */
export interface DispatchOutcome {
  /** The command, or "invalid" when CNI_COMMAND itself was bad. */
  command: CniCommand | "invalid";
  /** 0 on success, else the CNI error code. */
  code: number;
  message?: string;
  containerId?: string;
  pod?: string;
}

export interface DispatchReply extends AgentReply {
  outcome: DispatchOutcome;
}

/**
 * Turns an invocation into a typed request. Checks run in the order a user can act on: the command, then
 * whether stdin decodes, then the version, then the environment the command needs, then config fields.
 */
export function buildRequest(inv: AgentRequest, signal: AbortSignal): CniRequest | { command: "VERSION" } {
  const command = parseCniCommand(inv.env);
  if (command === "VERSION") return { command };
  const raw = decodeConfig(inv.stdin);
  const cniVersion = configVersion(raw);
  if (!versionAtLeast(cniVersion, COMMAND_SINCE[command]))
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `CNI_COMMAND=${command} needs cniVersion ${COMMAND_SINCE[command]} or newer, but the config says ${cniVersion}`,
    );
  const env = parseCniEnv(inv.env, command);
  const config = parsePluginConfig(raw, command);
  const base = { cniVersion, config, cniPath: env.path, signal };
  switch (command) {
    case "ADD":
    case "CHECK": {
      const { podNamespace, podName } = env.args.k8s;
      if (!podNamespace || !podName)
        throw new CniError(
          CniErrorCode.InvalidEnvironment,
          `CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME for ${command}; this plugin serves Kubernetes pods only`,
        );
      return {
        ...base,
        command,
        containerId: env.containerId,
        ifname: env.ifname,
        netns: env.netns,
        args: env.args.all,
        k8s: { ...env.args.k8s, podNamespace, podName },
        ...(config.prevResult ? { prevResult: config.prevResult } : {}),
      };
    }
    case "DEL":
      return {
        ...base,
        command,
        containerId: env.containerId,
        ifname: env.ifname,
        netns: env.netns,
        args: env.args.all,
        k8s: env.args.k8s,
        ...(config.prevResult ? { prevResult: config.prevResult } : {}),
      };
    case "GC":
      return { ...base, command, validAttachments: config.validAttachments ?? [] };
    case "STATUS":
      return { ...base, command };
  }
}

function podOf(req: CniRequest): string | undefined {
  if (req.command === "GC" || req.command === "STATUS") return undefined;
  const { podNamespace, podName } = req.k8s;
  return podNamespace && podName ? `${podNamespace}/${podName}` : undefined;
}

/** Serves one invocation. Never throws: every failure becomes error JSON with exit code 1. */
export async function dispatch(
  inv: AgentRequest,
  handler: CniHandler,
  signal: AbortSignal,
): Promise<DispatchReply> {
  let command: DispatchOutcome["command"] = "invalid";
  let req: CniRequest | undefined;
  let version: CniVersion | undefined;
  try {
    const built = buildRequest(inv, signal);
    command = built.command;
    if (built.command === "VERSION")
      return {
        exitCode: 0,
        stdout: `${JSON.stringify(versionReply(inv.stdin))}\n`,
        outcome: { command, code: 0 },
      };
    req = built;
    version = req.cniVersion;
    let stdout = "";
    switch (req.command) {
      case "ADD":
        stdout = formatResult(await handler.add(req), req.cniVersion);
        break;
      case "DEL":
        await handler.del(req);
        break;
      case "CHECK":
        await handler.check(req);
        break;
      case "GC":
        await handler.gc(req);
        break;
      case "STATUS":
        await handler.status(req);
        break;
    }
    return { exitCode: 0, stdout, outcome: { command, code: 0, ...identity(req) } };
  } catch (err) {
    if (command === "invalid") {
      try {
        command = parseCniCommand(inv.env);
      } catch {}
    }
    const cniErr = asCniError(err);
    return {
      exitCode: 1,
      stdout: formatCniError(cniErr, version ?? replyVersion(inv.stdin)),
      outcome: {
        command,
        code: cniErr.code,
        message: cniErr.details ? `${cniErr.message}: ${cniErr.details}` : cniErr.message,
        ...(req ? identity(req) : inv.env.CNI_CONTAINERID ? { containerId: inv.env.CNI_CONTAINERID } : {}),
      },
    };
  }
}

function identity(req: CniRequest): Pick<DispatchOutcome, "containerId" | "pod"> {
  const out: Pick<DispatchOutcome, "containerId" | "pod"> = {};
  if ("containerId" in req) out.containerId = req.containerId;
  const pod = podOf(req);
  if (pod) out.pod = pod;
  return out;
}
