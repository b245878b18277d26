// Teardown in the reverse order of setup. node:test runs a test's after hooks in the order they were added and
// skips the rest once one throws, so with one hook per rig piece the apiserver and NB are stopped first, while
// the controller and every client still run against them (reconnecting until they are stopped in turn), and a
// failing stop leaves the pieces after it running. A Teardown runs every step, last added first, and reports
// all failures at the end.

export interface AfterHook {
  after(fn: () => unknown): void;
}

export interface Teardown extends AfterHook {
  /** Runs every step now, last added first; later calls do nothing. Rejects with every failure. */
  run(): Promise<void>;
}

const stacks = new WeakMap<AfterHook, Teardown>();
const made = new WeakSet<AfterHook>();

/**
 * The teardown stack of `t`, made on first use: every rig helper given the same test registers its stop here,
 * so a test's servers, clients and processes are stopped last started first, each one even if another fails.
 */
export function teardownFor(t: AfterHook): Teardown {
  // Given a stack, a helper joins it instead of nesting a new one in it.
  if (made.has(t)) return t as Teardown;
  let stack = stacks.get(t);
  if (!stack) {
    stack = teardownStack(t);
    stacks.set(t, stack);
  }
  return stack;
}

/** A teardown stack run by one after hook of `t`; pass it where a rig helper takes `t`. */
export function teardownStack(t: AfterHook): Teardown {
  const steps: (() => unknown)[] = [];
  let running: Promise<void> | undefined;
  const run = (): Promise<void> => {
    running ??= (async () => {
      const errors: unknown[] = [];
      while (steps.length > 0) {
        const step = steps.pop() as () => unknown;
        try {
          await step();
        } catch (e) {
          errors.push(e);
        }
      }
      if (errors.length === 1) throw errors[0];
      if (errors.length > 1) throw new AggregateError(errors, `${errors.length} teardown steps failed`);
    })();
    return running;
  };
  t.after(run);
  const stack: Teardown = {
    after: (fn) => {
      if (running) throw new Error("teardown already ran");
      steps.push(fn);
    },
    run,
  };
  made.add(stack);
  return stack;
}
