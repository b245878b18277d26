// V8 flags the product's long-running processes (controller, node agent) are started with, in one place so the
// launchers and the benchmarks agree. A small young generation keeps resident memory close to what the caches
// really hold: after a large initial monitor load, V8 would otherwise keep up to 3 x 16 MiB of young space.
export const NODE_FLAGS: readonly string[] = ["--max-semi-space-size=2"];
