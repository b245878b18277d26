// Public API of the OVSDB client library.
export { Backoff, type BackoffOptions } from "./backoff.ts";
export { Cache, type IndexFn, type IndexKey, type RowEvent, TableCache } from "./cache.ts";
export {
  type ClientOptions,
  type ClientState,
  type ClientStats,
  type Logger,
  OvsdbClient,
} from "./client.ts";
export * from "./datum.ts";
export * from "./errors.ts";
export { setSize } from "./live-set.ts";
export * from "./model.ts";
export * from "./ownership.ts";
export { type DatabaseSchema, intersectSchema, parseSchema, type TableSchema } from "./schema.ts";
export { byUuid, type Condition, type Mutation, Transaction, type TransactionResult } from "./transaction.ts";
export { parseRemote, type TlsConfig } from "./transport.ts";
