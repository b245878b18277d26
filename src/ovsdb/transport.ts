// Opening a byte stream to an OVSDB remote written the OVS way: "unix:PATH", "tcp:HOST:PORT", "ssl:HOST:PORT".

import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { ConnectionClosedError, OvsdbError, TlsError } from "./errors.ts";

export type Remote =
  | { kind: "unix"; path: string; text: string }
  | { kind: "tcp" | "ssl"; host: string; port: number; text: string };

export interface TlsConfig {
  /** PEM contents or file paths. */
  ca: string | Buffer;
  /** Our certificate and key; OVS servers require them. Leaving them out is only useful to test that refusal. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /**
   * OVS checks only that the peer's certificate chains to the CA, because remotes are usually ssl:IP:PORT with
   * ovs-pki certificates that name no host. Set this to also check the server name against the certificate.
   */
  verifyHostname?: boolean;
  servername?: string;
}

export function parseRemote(text: string): Remote {
  const colon = text.indexOf(":");
  const kind = text.slice(0, colon);
  const rest = text.slice(colon + 1);
  if (kind === "unix" && rest.length > 0) return { kind, path: rest, text };
  if (kind === "tcp" || kind === "ssl") {
    // IPv6 hosts are bracketed: tcp:[::1]:6641
    const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(rest);
    const port = m ? Number(m[3]) : Number.NaN;
    if (m && port > 0 && port < 65536) return { kind, host: (m[1] ?? m[2]) as string, port, text };
  }
  throw new OvsdbError(
    `invalid OVSDB remote "${text}": expected unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT (IPv6 hosts in brackets)`,
  );
}

function pem(v: string | Buffer): string | Buffer {
  if (Buffer.isBuffer(v) || v.includes("-----BEGIN")) return v;
  return readFileSync(v);
}

function describeTlsError(remote: string, e: NodeJS.ErrnoException): TlsError {
  const code = e.code ?? "";
  let hint = "";
  if (/CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code)) {
    hint = " (the server's certificate is not signed by the configured CA: check the CA file)";
  } else if (/ALERT|HANDSHAKE|ECONNRESET/.test(code) || /alert/i.test(e.message)) {
    hint = " (the server refused our certificate: it must be signed by a CA the server trusts)";
  } else if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    hint = " (host name check failed: the certificate does not name this host)";
  }
  return new TlsError(`${remote}: TLS failed: ${e.message}${hint}`, { cause: e });
}

/** Connects and resolves once the stream is usable (after the TLS handshake for ssl:). */
export function connectRemote(
  remote: Remote,
  tlsConfig?: TlsConfig,
  timeoutMs = 10_000,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    let sock: net.Socket;
    let settled = false;
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock?.destroy();
      reject(e);
    };
    const timer = setTimeout(
      () => fail(new ConnectionClosedError(`${remote.text}: connect timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
    const ok = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.setNoDelay?.(true);
      sock.removeAllListeners("error");
      resolve(sock);
    };
    if (remote.kind === "unix") {
      sock = net.connect({ path: remote.path }, ok);
    } else if (remote.kind === "tcp") {
      sock = net.connect({ host: remote.host, port: remote.port }, ok);
    } else {
      if (!tlsConfig) {
        fail(new TlsError(`${remote.text}: an ssl: remote needs a CA, a certificate and a private key`));
        return;
      }
      const verifyHost = tlsConfig.verifyHostname === true;
      const servername = tlsConfig.servername ?? (net.isIP(remote.host) ? undefined : remote.host);
      sock = tls.connect(
        {
          host: remote.host,
          port: remote.port,
          ca: pem(tlsConfig.ca),
          ...(tlsConfig.cert ? { cert: pem(tlsConfig.cert) } : {}),
          ...(tlsConfig.key ? { key: pem(tlsConfig.key) } : {}),
          rejectUnauthorized: true,
          ...(servername ? { servername } : {}),
          ...(verifyHost ? {} : { checkServerIdentity: () => undefined }),
        },
        ok,
      );
    }
    sock.once("error", (e: NodeJS.ErrnoException) => {
      if (remote.kind === "ssl") fail(describeTlsError(remote.text, e));
      else fail(new ConnectionClosedError(`${remote.text}: ${e.message}`, { cause: e }));
    });
  });
}

/** Classifies an error seen on an established ssl: stream; TLS 1.3 reports a refused client certificate only after the handshake. */
export function classifyStreamError(remote: Remote, e: Error): Error {
  if (remote.kind !== "ssl") return e;
  const msg = e.message;
  const code = (e as NodeJS.ErrnoException).code ?? "";
  if (/alert|certificate|handshake/i.test(msg) || /ALERT|SSL|TLS/.test(code)) {
    return describeTlsError(remote.text, e as NodeJS.ErrnoException);
  }
  return e;
}
