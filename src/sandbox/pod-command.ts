// What process stands in for a container. Images are not pulled: a container becomes podserver (the
// agnhost-like fixture) driven by its args and ports, or, when it names a command, that command from the
// machine. Pure, so the mapping is tested without processes.

import { basename } from "node:path";

export interface ContainerLike {
  name: string;
  command?: string[];
  args?: string[];
  ports?: Array<{ containerPort: number; protocol?: string; name?: string }>;
  env?: Array<{ name: string; value?: string }>;
}

export interface ContainerProcess {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** podserver flags serving each declared port: UDP as UDP, TCP ports named http* as HTTP, other TCP as TCP. */
export function flagsForPorts(ports: ContainerLike["ports"]): string[] {
  const flags: string[] = [];
  for (const p of ports ?? []) {
    const proto = (p.protocol ?? "TCP").toUpperCase();
    if (proto === "UDP") flags.push("--udp", String(p.containerPort));
    else if (proto === "TCP")
      flags.push(/^http/i.test(p.name ?? "") ? "--http" : "--tcp", String(p.containerPort));
    // SCTP has no podserver listener; the port is declared but nothing answers.
  }
  return flags;
}

export function containerProcess(
  container: ContainerLike,
  pod: { name: string; namespace: string },
  podserver: string,
): ContainerProcess {
  const env: Record<string, string> = { POD_NAME: pod.name, POD_NAMESPACE: pod.namespace };
  for (const e of container.env ?? []) {
    // Only literal values: valueFrom would need the kubelet's secret and downward-API plumbing.
    if (e.value !== undefined) env[e.name] = e.value;
  }
  const args = container.args ?? [];
  const command = container.command ?? [];
  if (command.length > 0 && basename(command[0] as string) !== "podserver") {
    return { command: command[0] as string, args: [...command.slice(1), ...args], env };
  }
  const serverArgs =
    command.length > 0
      ? [...command.slice(1), ...args]
      : args.length > 0
        ? [...args]
        : flagsForPorts(container.ports);
  if (serverArgs.length === 0) {
    // podserver refuses to serve nothing; a container without ports or args just has to stay up.
    return { command: "sleep", args: ["infinity"], env };
  }
  const isServer = serverArgs[0] !== "dial";
  if (isServer && !serverArgs.some((a) => a === "--name" || a.startsWith("--name=")))
    serverArgs.push("--name", pod.name);
  return { command: podserver, args: serverArgs, env };
}
