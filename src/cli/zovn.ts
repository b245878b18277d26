// zovn: the project's command-line entry: `sandbox` (the development cluster) and `uninstall` (NB clean-up).

import { runSandboxCommand } from "./sandbox.ts";
import { runUninstallCommand } from "./uninstall.ts";

const usage = `usage: zovn sandbox up|down|status|kubectl|exec|restart-node|demo ... (zovn sandbox --help)
       zovn uninstall --nb REMOTES [--dry-run] ... (zovn uninstall --help)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "sandbox":
      return runSandboxCommand(rest);
    case "uninstall":
      return runUninstallCommand(rest);
    case undefined:
    case "-h":
    case "--help":
      process.stdout.write(`${usage}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`zovn: unknown command "${command}"\n${usage}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    // The internal daemons keep running; every other command ends here.
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`zovn: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
