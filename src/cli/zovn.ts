// zovn: the project's command-line entry. Only the `sandbox` command exists so far.

import { runSandboxCommand } from "./sandbox.ts";

const usage = `usage: zovn sandbox up|down|status|kubectl|exec|restart-node|demo ... (zovn sandbox --help)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "sandbox":
      return runSandboxCommand(rest);
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
