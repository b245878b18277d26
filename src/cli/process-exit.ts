// How every daemon entry point ends: the exit code of main(), or 1 with the stack of what it threw.
export function runMain(program: string, main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`${program}: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
