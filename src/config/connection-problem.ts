// Why a daemon is not connected to an OVN database, in the operator's terms: the setting to look at and what to
// change, from the last connection error. Readiness (/readyz) and the log say the same; the daemon stays up and
// keeps retrying, so a fixed address or a renewed certificate Secret takes effect without a restart.

/** The settings behind one database connection, by the names the operator writes them. */
export interface ConnectionSettings {
  /** What is connected to, e.g. "the OVN northbound database". */
  readonly what: string;
  /** The address setting and its variable, e.g. "ovn.nbdbAddress (ZSTACK_OVN_NBDB_ADDRESS)". */
  readonly addressSetting: string;
  readonly remotes: string;
  /** The TLS files by setting, when TLS is on. */
  readonly ssl?: {
    readonly caCert: string;
    readonly clientCert: string;
    readonly clientKey: string;
  };
}

const FILE_SETTINGS = [
  ["caCert", "ovn.ssl.caCert"],
  ["clientCert", "ovn.ssl.clientCert"],
  ["clientKey", "ovn.ssl.clientKey"],
] as const;

/** One sentence: not connected, the cause as the last error shows it, and the fix naming the setting. */
export function connectionProblem(s: ConnectionSettings, err: Error | undefined): string {
  const head = `not connected to ${s.what} at ${s.remotes} (${s.addressSetting})`;
  if (!err) return `${head} yet`;
  const e = err as NodeJS.ErrnoException;
  const msg = e.message.replace(/\s+/g, " ").trim();
  const code = e.code ?? (e.cause as NodeJS.ErrnoException | undefined)?.code ?? "";
  if (s.ssl && e.path !== undefined) {
    const file = FILE_SETTINGS.find(([k]) => s.ssl?.[k] === e.path);
    if (file) return `${head}: ${file[1]}=${e.path} cannot be read (${code || msg}); mount the file there`;
  }
  if (/KEY_VALUES_MISMATCH|key values mismatch/i.test(`${code} ${msg}`))
    return `${head}: ${msg}; ovn.ssl.clientKey is not the key of ovn.ssl.clientCert: give the pair that belongs together`;
  if (/PEM|NO_START_LINE|BAD_BASE64|ASN1|DECODER/i.test(code))
    return `${head}: ${msg}; a file of ovn.ssl.caCert, ovn.ssl.clientCert, ovn.ssl.clientKey is not PEM: give the CA certificate, the client certificate and its private key as PEM files`;
  if (/not signed by the configured CA/.test(msg))
    return `${head}: ${msg}; set ovn.ssl.caCert to the CA that signed the database server's certificate`;
  if (/refused our certificate/.test(msg))
    return `${head}: ${msg}; set ovn.ssl.clientCert and ovn.ssl.clientKey to a client certificate (and its key) signed by a CA the database server trusts`;
  if (/host name check failed/.test(msg))
    return `${head}: ${msg}; name the remotes as the server's certificate does, or turn ovn.ssl.verifyHostname off`;
  if (
    /ECONNREFUSED|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|ENOENT/.test(code) ||
    /timed out/.test(msg)
  )
    return `${head}: ${msg}; nothing answers there: check ${s.addressSetting} (host, port, and tcp: or ssl: as the server listens) and that the network lets this host reach it`;
  if (/ECONNRESET|EPROTO|wrong version number|packet length/i.test(`${code} ${msg}`))
    return `${head}: ${msg}; the server closed the connection: if it serves ssl:, write ssl: remotes with ovn.ssl.*; if it serves tcp:, write tcp: remotes`;
  return `${head}: ${msg}`;
}
