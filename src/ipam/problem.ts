// Input problems name the field that is wrong and say how to fix it, so a Subnet status or a pod event can
// show them to the user unchanged.

export interface FieldProblem {
  /** Path of the offending value, e.g. `spec.excludeIPs[2]` or `ip_address`. */
  readonly field: string;
  /** What is wrong and how to fix it, without the field prefix. */
  readonly message: string;
}

export function formatProblem(problem: FieldProblem): string {
  return `${problem.field}: ${problem.message}`;
}

/** Thrown by the parsers when a value given by a user cannot be read. */
export class InvalidInputError extends Error {
  readonly problem: FieldProblem;
  constructor(field: string, message: string) {
    super(formatProblem({ field, message }));
    this.name = "InvalidInputError";
    this.problem = { field, message };
  }
}
