// Errors of the node agent's networking steps. Each names the step, so a CNI error tells the operator which
// part of wiring a pod failed or ran out of time.

/** The steps of a pod ADD, in order, as they appear in errors, timings and metrics. */
export type AddStep = "veth" | "ovs-port" | "ovn-installed";

/** A wait with a bounded budget ran out. */
export class StepTimeoutError extends Error {
  constructor(
    readonly step: string,
    readonly budgetMs: number,
    detail?: string,
  ) {
    super(`timed out after ${budgetMs} ms in step ${step}${detail ? `: ${detail}` : ""}`);
    this.name = "StepTimeoutError";
  }
}

/** A step failed for a reason other than time. */
export class StepError extends Error {
  constructor(
    readonly step: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`step ${step}: ${message}`, options);
    this.name = "StepError";
  }
}

/** CHECK found the attachment different from what ADD set up. */
export class CheckFailedError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`check failed: ${problems.join("; ")}`);
    this.name = "CheckFailedError";
  }
}
