import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type ConnectionSettings, connectionProblem } from "./connection-problem.ts";

const nb: ConnectionSettings = {
  what: "the OVN northbound database",
  addressSetting: "ovn.nbdbAddress (ZSTACK_OVN_NBDB_ADDRESS)",
  remotes: "ssl:10.0.0.1:6641",
  ssl: { caCert: "/etc/ovn/ca.pem", clientCert: "/etc/ovn/cert.pem", clientKey: "/etc/ovn/key.pem" },
};
const errno = (message: string, props: Record<string, unknown>) => Object.assign(new Error(message), props);

describe("connectionProblem", () => {
  test("before any attempt failed it says not connected yet, naming the address and its setting", () => {
    assert.equal(
      connectionProblem(nb, undefined),
      "not connected to the OVN northbound database at ssl:10.0.0.1:6641 (ovn.nbdbAddress (ZSTACK_OVN_NBDB_ADDRESS)) yet",
    );
  });

  test("a refused or timed-out connection points at the address setting", () => {
    for (const e of [
      errno("ssl:10.0.0.1:6641: TLS failed: connect ECONNREFUSED 10.0.0.1:6641", {
        cause: { code: "ECONNREFUSED" },
      }),
      new Error("ssl:10.0.0.1:6641: connect timed out after 10000 ms"),
      errno("getaddrinfo ENOTFOUND nb.example", { code: "ENOTFOUND" }),
    ])
      assert.match(
        connectionProblem(nb, e),
        /nothing answers there: check ovn\.nbdbAddress \(ZSTACK_OVN_NBDB_ADDRESS\)/,
      );
  });

  test("each certificate problem names its setting", () => {
    const cases: [Error, RegExp][] = [
      [
        new Error(
          "TLS failed: alert unknown ca (the server refused our certificate: it must be signed by a CA the server trusts)",
        ),
        /set ovn\.ssl\.clientCert and ovn\.ssl\.clientKey/,
      ],
      [
        new Error(
          "TLS failed: self-signed certificate in certificate chain (the server's certificate is not signed by the configured CA: check the CA file)",
        ),
        /set ovn\.ssl\.caCert to the CA/,
      ],
      [
        new Error(
          "TLS failed: Hostname/IP does not match (host name check failed: the certificate does not name this host)",
        ),
        /ovn\.ssl\.verifyHostname off/,
      ],
      [
        errno("key values mismatch", { code: "ERR_OSSL_X509_KEY_VALUES_MISMATCH" }),
        /ovn\.ssl\.clientKey is not the key of ovn\.ssl\.clientCert/,
      ],
      [
        errno("error:1E08010C:DECODER routines::unsupported", { code: "ERR_OSSL_UNSUPPORTED" }),
        /: error:1E08010C/,
      ],
      [errno("no start line", { code: "ERR_OSSL_PEM_NO_START_LINE" }), /is not PEM/],
    ];
    for (const [e, want] of cases) assert.match(connectionProblem(nb, e), want);
  });

  test("a certificate file that cannot be read is named by its setting and path", () => {
    const e = errno("ENOENT: no such file or directory, open '/etc/ovn/key.pem'", {
      code: "ENOENT",
      path: "/etc/ovn/key.pem",
    });
    assert.match(
      connectionProblem(nb, e),
      /: ovn\.ssl\.clientKey=\/etc\/ovn\/key\.pem cannot be read \(ENOENT\); mount the file there$/,
    );
    // Not one of the TLS files (a unix: socket path): the address is what to check.
    const sock = errno("connect ENOENT /run/ovn/nb.sock", { code: "ENOENT", path: "/run/ovn/nb.sock" });
    assert.match(
      connectionProblem({ ...nb, remotes: "unix:/run/ovn/nb.sock" }, sock),
      /check ovn\.nbdbAddress/,
    );
  });

  test("a reset by a server speaking the other protocol suggests tcp: against ssl:", () => {
    const e = errno("read ECONNRESET", { code: "ECONNRESET" });
    assert.match(connectionProblem(nb, e), /if it serves ssl:, write ssl: remotes/);
  });
});
