// What the zstack-ovn-cni executable does, as a function: forward the invocation to the node agent and
// return its reply. It does no networking. It answers by itself only for VERSION, for stdin it cannot read
// a socket path from, and, when the agent is unreachable, for input no retry could fix.

import { buildRequest } from "./dispatch.ts";
import { CniError, CniErrorCode, formatCniError } from "./error.ts";
import {
  type AgentReply,
  AgentUnreachableError,
  cniEnvOf,
  DEFAULT_SERVER_SOCKET,
  forwardToAgent,
} from "./protocol.ts";
import { type CniEnvVars, decodeConfig, replyVersion, socketPathProblem, versionReply } from "./spec.ts";

export interface ShimOptions {
  /** Where the agent listens when the config has no serverSocket. */
  defaultSocket?: string;
  timeoutMs?: number;
}

function errorReply(err: CniError, stdin: string): AgentReply {
  return { exitCode: 1, stdout: formatCniError(err, replyVersion(stdin)) };
}

/** The socket the config names, the default when it names none, or the error that prevents knowing. */
export function socketPathFor(stdin: string, defaultSocket = DEFAULT_SERVER_SOCKET): string {
  const config = decodeConfig(stdin);
  if (config.serverSocket === undefined) return defaultSocket;
  const problem = socketPathProblem(config.serverSocket);
  if (problem)
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network config field "serverSocket" ${problem}; remove it to use ${defaultSocket}`,
    );
  return config.serverSocket as string;
}

/** Code 11 unless the input itself is wrong, in which case retrying would never help and that error wins. */
function unreachableReply(err: AgentUnreachableError, env: CniEnvVars, stdin: string): AgentReply {
  try {
    buildRequest({ env: cniEnvOf(env), stdin }, new AbortController().signal);
  } catch (invalid) {
    if (invalid instanceof CniError) return errorReply(invalid, stdin);
  }
  return errorReply(
    new CniError(
      CniErrorCode.TryAgainLater,
      err.message,
      `socket ${err.socketPath}: ${err.phase === "connect" ? "not reachable" : "connection lost"} (${err.causeCode})`,
    ),
    stdin,
  );
}

export async function runShim(env: CniEnvVars, stdin: string, opts: ShimOptions = {}): Promise<AgentReply> {
  if (env.CNI_COMMAND === "VERSION")
    return { exitCode: 0, stdout: `${JSON.stringify(versionReply(stdin))}\n` };
  let socketPath: string;
  try {
    socketPath = socketPathFor(stdin, opts.defaultSocket);
  } catch (err) {
    return errorReply(err as CniError, stdin);
  }
  try {
    const forwardOpts = opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs };
    return await forwardToAgent(socketPath, { env: cniEnvOf(env), stdin }, forwardOpts);
  } catch (err) {
    if (err instanceof AgentUnreachableError) return unreachableReply(err, env, stdin);
    if (err instanceof CniError) return errorReply(err, stdin);
    return errorReply(
      new CniError(CniErrorCode.IoFailure, `talking to the node agent at ${socketPath} failed`, String(err)),
      stdin,
    );
  }
}
