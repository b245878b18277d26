// Typed errors. `retryable` tells callers whether the same request may succeed later unchanged.

export class OvsdbError extends Error {
  readonly retryable: boolean = false;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The schema itself is malformed, or a client model does not fit the server. */
export class SchemaError extends OvsdbError {}

/** A value given by the caller does not fit its column (type, enum, range, length, cardinality). */
export class ValueError extends OvsdbError {
  constructor(
    message: string,
    readonly table?: string,
    readonly column?: string,
  ) {
    super(message);
  }
}

/** The peer broke the protocol: garbage on the wire, a reply to nothing, a malformed message. */
export class ProtocolError extends OvsdbError {}

/** The connection closed (or was never open) before the request completed; it may or may not have been applied. */
export class ConnectionClosedError extends OvsdbError {
  override readonly retryable = true;
}

/**
 * A write refused before it was sent, because the fence it went through (OvsdbClient.fenced) is closed: the
 * writer lost the right to write, e.g. leadership. Nothing reached the server.
 */
export class WriteFencedError extends OvsdbError {}

/** TLS handshake or certificate verification failed. Not retryable: the configuration is wrong. */
export class TlsError extends OvsdbError {}

/** No reply within the caller's deadline. The request may still be applied by the server. */
export class TimeoutError extends OvsdbError {
  override readonly retryable = true;
}

/** A JSON-RPC error reply (`error` member set) to a method other than transact. */
export class RpcError extends OvsdbError {
  constructor(
    readonly method: string,
    readonly error: unknown,
  ) {
    super(`${method}: ${typeof error === "string" ? error : JSON.stringify(error)}`);
  }
}

/** The database name is not served by this server. */
export class UnknownDatabaseError extends OvsdbError {}

/** The server is a clustered member that is not the leader, is disconnected from the cluster, or is stale. */
export class NotLeaderError extends OvsdbError {
  override readonly retryable = true;
}

export interface OperationFailure {
  readonly index: number;
  readonly op?: string;
  readonly table?: string;
  readonly error: string;
  readonly details?: string;
}

/**
 * A transaction was rejected by the server. `failures` lists the failing operations (index into the request)
 * and, for commit-time errors, an entry with index equal to the operation count.
 */
export class TransactionError extends OvsdbError {
  constructor(
    readonly error: string,
    readonly failures: readonly OperationFailure[],
    message?: string,
  ) {
    super(message ?? TransactionError.describe(error, failures));
  }
  static describe(error: string, failures: readonly OperationFailure[]): string {
    const parts = failures.map(
      (f) =>
        `op ${f.index}${f.op ? ` (${f.op}${f.table ? ` ${f.table}` : ""})` : ""}: ${f.error}${f.details ? `: ${f.details}` : ""}`,
    );
    return `transaction failed: ${error}${parts.length ? ` [${parts.join("; ")}]` : ""}`;
  }
}

export class ConstraintViolationError extends TransactionError {
  /**
   * Whether the refusal was a unique index of `table` on `column` (a second row with the same value), as
   * ovsdb-server words it: `... rows in "T" table to have identical values (...) for index on column "C" ...`.
   */
  violatesIndex(table: string, column: string): boolean {
    return this.failures.some(
      (f) =>
        f.details?.includes(`rows in "${table}" table`) && f.details.includes(`index on column "${column}"`),
    );
  }
}
export class ReferentialIntegrityError extends TransactionError {}
/** A `wait` operation timed out: the database did not hold the state the transaction was guarded on. */
export class WaitFailedError extends TransactionError {}
export class NotLeaderTransactionError extends TransactionError {
  override readonly retryable = true;
}

/** A row inserted into a non-root table that nothing in the same transaction refers to: the server would delete it silently. */
export class OrphanRowError extends OvsdbError {
  constructor(
    readonly table: string,
    readonly uuidName: string,
  ) {
    super(
      `insert into non-root table ${table} (uuid-name ${uuidName}) is not referenced by any operation in the same ` +
        `transaction; ovsdb-server would garbage-collect it at commit. Add a reference to it from a root row in this transaction`,
    );
  }
}

export function transactionErrorFor(error: string, failures: readonly OperationFailure[]): TransactionError {
  switch (error) {
    case "constraint violation":
      return new ConstraintViolationError(error, failures);
    case "referential integrity violation":
      return new ReferentialIntegrityError(error, failures);
    case "timed out":
      return new WaitFailedError(error, failures);
    case "not leader":
      return new NotLeaderTransactionError(error, failures);
    default:
      return new TransactionError(error, failures);
  }
}

/**
 * Whether a failed commit certainly left the database unchanged: the server refused the transaction, or the
 * client refused to send it. A lost connection or a timeout leaves the outcome unknown: read it from the database.
 */
export function certainlyNotApplied(e: unknown): boolean {
  return e instanceof TransactionError || e instanceof ValueError || e instanceof OrphanRowError;
}
