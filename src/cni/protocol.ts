// The shim↔agent protocol: one HTTP/1.1 POST per CNI invocation over the agent's unix socket.
// The version is in the path (/v1/cni) so a newer agent can serve older shims side by side, and an agent
// that does not know the path answers 404, which the shim reports as a protocol mismatch.
//
//   POST /v1/cni  {"env": {"CNI_COMMAND": "ADD", ...}, "stdin": "<the network config as text>"}
//   200           {"exitCode": 0, "stdout": "<exactly what the shim prints>"}

import { request } from "node:http";
import { CniError, CniErrorCode } from "./error.ts";

export const PROTOCOL_VERSION = 1;
export const CNI_REQUEST_PATH = `/v${PROTOCOL_VERSION}/cni`;
export const DEFAULT_SERVER_SOCKET = "/var/run/zstack-ovn/cni-server.sock";
/** Bigger bodies are refused; a CNI config with a prevResult is a few KiB. */
export const MAX_REQUEST_BYTES = 1 << 20;

export interface AgentRequest {
  /** Only the CNI_* variables: the runtime's other variables (and any secrets in them) stay in the shim. */
  env: Record<string, string>;
  stdin: string;
}

export interface AgentReply {
  exitCode: number;
  stdout: string;
}

export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/** The CNI_* subset of an environment. */
export function cniEnvOf(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (k.startsWith("CNI_") && v !== undefined) out[k] = v;
  return out;
}

export function parseAgentRequest(body: string): AgentRequest {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    throw new ProtocolError(`request body is not JSON: ${(err as Error).message}`);
  }
  const o = value as Partial<AgentRequest> | null;
  if (
    typeof o !== "object" ||
    o === null ||
    typeof o.stdin !== "string" ||
    typeof o.env !== "object" ||
    o.env === null
  )
    throw new ProtocolError('request body must be {"env": {...}, "stdin": "..."}');
  for (const [k, v] of Object.entries(o.env))
    if (typeof v !== "string") throw new ProtocolError(`env.${k} must be a string`);
  return { env: o.env as Record<string, string>, stdin: o.stdin };
}

export function parseAgentReply(body: string): AgentReply {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    throw new ProtocolError(`reply body is not JSON: ${(err as Error).message}`);
  }
  const o = value as Partial<AgentReply> | null;
  if (typeof o !== "object" || o === null || typeof o.stdout !== "string" || !Number.isInteger(o.exitCode))
    throw new ProtocolError('reply body must be {"exitCode": N, "stdout": "..."}');
  return { exitCode: o.exitCode as number, stdout: o.stdout };
}

/** The agent could not be asked, or went away before it answered; the runtime should retry (code 11). */
export class AgentUnreachableError extends Error {
  override name = "AgentUnreachableError";
  constructor(
    readonly socketPath: string,
    /** connect: nothing listens there; lost: the connection broke while the agent worked on it. */
    readonly phase: "connect" | "lost",
    readonly causeCode: string,
  ) {
    super(
      phase === "connect"
        ? `cannot reach the zstack-ovn node agent at ${socketPath} (${causeCode}); is zstack-ovnkube-node running on this node?`
        : `the zstack-ovn node agent at ${socketPath} closed the connection before answering (${causeCode})`,
    );
  }
}

const CONNECT_ERRORS = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "EPERM", "ENOTSOCK", "ENOTDIR", "ELOOP"]);

export interface ForwardOptions {
  /** Gives up after this long with AgentUnreachableError (phase lost); no limit by default. */
  timeoutMs?: number;
}

/** Sends one invocation to the agent and returns its reply. Throws AgentUnreachableError or a CniError. */
export function forwardToAgent(
  socketPath: string,
  req: AgentRequest,
  opts: ForwardOptions = {},
): Promise<AgentReply> {
  const body = JSON.stringify(req);
  return new Promise((resolve, reject) => {
    let connected = false;
    const clientReq = request(
      {
        socketPath,
        path: CNI_REQUEST_PATH,
        method: "POST",
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", (err: NodeJS.ErrnoException) =>
          reject(new AgentUnreachableError(socketPath, "lost", err.code ?? err.message)),
        );
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode === 503) {
            reject(new AgentUnreachableError(socketPath, "lost", `agent is shutting down: ${text.trim()}`));
            return;
          }
          if (res.statusCode !== 200) {
            reject(
              new CniError(
                CniErrorCode.AgentProtocolMismatch,
                `the node agent at ${socketPath} refused the request (HTTP ${res.statusCode} for POST ${CNI_REQUEST_PATH}); the shim and the agent may be of different releases`,
                text.trim().slice(0, 500),
              ),
            );
            return;
          }
          try {
            resolve(parseAgentReply(text));
          } catch (err) {
            reject(new CniError(CniErrorCode.AgentProtocolMismatch, (err as Error).message));
          }
        });
      },
    );
    clientReq.on("socket", (sock) => sock.on("connect", () => (connected = true)));
    clientReq.on("error", (err: NodeJS.ErrnoException) => {
      const code = err.code ?? err.message;
      const phase = !connected && CONNECT_ERRORS.has(code) ? "connect" : "lost";
      reject(new AgentUnreachableError(socketPath, phase, code));
    });
    if (opts.timeoutMs !== undefined) {
      clientReq.setTimeout(opts.timeoutMs, () =>
        clientReq.destroy(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })),
      );
    }
    clientReq.end(body);
  });
}
