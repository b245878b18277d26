// Preloaded into every test file's process (hack/run-tests.sh): once the 'exit' event has run every listener, the
// process ends there with its exit code, instead of going on into Node's own environment teardown. A test file
// once passed every test and then spun at full CPU in that teardown (node::Environment::CleanupHandles looping in
// uv_run with no handle left to wait for: gdb on the stuck process, 2026-11-27), until the run's time limit failed
// CI. By the 'exit' event the event loop is empty and stdout (a pipe or socket: synchronous on Linux) holds every
// result already, so nothing is lost, unlike --test-force-exit, which can end a file before its last results are
// written.
const emit = process.emit.bind(process) as (event: string | symbol, ...args: unknown[]) => boolean;
process.emit = ((event: string | symbol, ...args: unknown[]): boolean => {
  const handled = emit(event, ...args);
  if (event === "exit") {
    const code = typeof args[0] === "number" ? args[0] : ((process.exitCode as number | undefined) ?? 0);
    (process as unknown as { reallyExit(code: number): never }).reallyExit(code);
  }
  return handled;
}) as typeof process.emit;
