// The node agent's own connection to ZStack's SB in External mode (read-only: the chassis check of
// external-chassis.ts), and why it is not connected, in the operator's terms: a wrong address or a bad
// certificate keeps the agent up and not Ready with the setting and the fix on /readyz, retrying. The TLS files
// are read at every connection attempt, so a corrected or renewed certificate Secret needs no restart.

import { type ConnectionSettings, connectionProblem } from "../config/connection-problem.ts";
import type { Logger } from "../observability/log.ts";
import { OvsdbClient } from "../ovsdb/client.ts";
import { type SbTables, sbModel } from "../ovsdb/models/sb.generated.ts";

export interface ExternalSbOptions {
  /** ovn.sbdbAddress: ZStack's SB remotes, comma-separated. */
  readonly remotes: string;
  readonly ssl?: {
    readonly caCert: string;
    readonly clientCert: string;
    readonly clientKey: string;
    readonly verifyHostname: boolean;
  };
  readonly logger?: Logger;
}

export interface ExternalSb {
  readonly client: OvsdbClient<SbTables>;
  /** Undefined while connected; else why not, naming the setting and the fix. */
  problem(): string | undefined;
}

export function externalSb(opts: ExternalSbOptions): ExternalSb {
  const settings: ConnectionSettings = {
    what: "ZStack's SB",
    addressSetting: "ovn.sbdbAddress (ZSTACK_OVN_SBDB_ADDRESS)",
    remotes: opts.remotes,
    ...(opts.ssl ? { ssl: opts.ssl } : {}),
  };
  const client = new OvsdbClient<SbTables>({
    remotes: opts.remotes,
    model: sbModel,
    leaderOnly: false,
    monitor: { Chassis: { columns: ["name", "hostname", "encaps"] }, Encap: true },
    ...(opts.ssl
      ? {
          tls: {
            ca: opts.ssl.caCert,
            cert: opts.ssl.clientCert,
            key: opts.ssl.clientKey,
            verifyHostname: opts.ssl.verifyHostname,
          },
        }
      : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
  let last: Error | undefined;
  client.on("connectFailed", (e) => {
    last = e;
    opts.logger?.warn({ problem: connectionProblem(settings, e) }, "cannot reach ZStack's SB yet");
  });
  client.on("disconnected", (e) => {
    if (e) last = e;
  });
  return {
    client,
    problem: () => (client.connected ? undefined : connectionProblem(settings, last)),
  };
}
