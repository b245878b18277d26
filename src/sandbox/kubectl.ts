// kubectl against the sandbox from the machine, through the forwarded apiserver port and the admin kubeconfig.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { run } from "./command.ts";
import type { Layout } from "./layout.ts";
import type { SandboxState } from "./state.ts";

export function adminKubeconfig(layout: Layout): string {
  return `${layout.pkiDir}/admin.kubeconfig`;
}

function kubectlPath(state: SandboxState): string {
  const path = state.binaries?.KUBECTL;
  if (!path || !existsSync(path))
    throw new Error("kubectl is not known for this sandbox; run `zovn sandbox up` first");
  return path;
}

/** Runs kubectl and returns its stdout. */
export function kubectl(layout: Layout, state: SandboxState, args: readonly string[]): Promise<string> {
  return run(kubectlPath(state), [`--kubeconfig=${adminKubeconfig(layout)}`, ...args]);
}

/** Runs kubectl with the terminal attached; resolves to its exit code. */
export function kubectlInteractive(
  layout: Layout,
  state: SandboxState,
  args: readonly string[],
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(kubectlPath(state), [`--kubeconfig=${adminKubeconfig(layout)}`, ...args], {
      stdio: "inherit",
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}
