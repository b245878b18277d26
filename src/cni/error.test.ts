import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { asCniError, CniError, CniErrorCode, formatCniError } from "./error.ts";
import { SUPPORTED_VERSIONS } from "./spec.ts";

describe("CNI error JSON", () => {
  it("has cniVersion, code, msg and details on one line for every supported version", () => {
    for (const v of SUPPORTED_VERSIONS) {
      const text = formatCniError(new CniError(7, 'network config field "mtu" is bad', "got 0"), v);
      assert.ok(text.endsWith("}\n"));
      assert.equal(text.split("\n").length, 2);
      assert.deepEqual(JSON.parse(text), {
        cniVersion: v,
        code: 7,
        msg: 'network config field "mtu" is bad',
        details: "got 0",
      });
    }
  });

  it("leaves details out when there are none", () => {
    assert.deepEqual(JSON.parse(formatCniError(new CniError(11, "later"), "0.4.0")), {
      cniVersion: "0.4.0",
      code: 11,
      msg: "later",
    });
  });

  it("keeps the spec's codes and puts ours at 100 and above", () => {
    assert.equal(CniErrorCode.IncompatibleVersion, 1);
    assert.equal(CniErrorCode.InvalidNetworkConfig, 7);
    assert.equal(CniErrorCode.TryAgainLater, 11);
    assert.equal(CniErrorCode.PluginNotAvailable, 50);
    assert.equal(CniErrorCode.PluginNotAvailableLimitedConnectivity, 51);
    const ours = Object.entries(CniErrorCode).filter(([, c]) => c >= 100);
    assert.ok(ours.length >= 5);
    assert.equal(
      new Set(Object.values(CniErrorCode)).size,
      Object.keys(CniErrorCode).length,
      "codes are unique",
    );
  });

  it("turns an unexpected throw into the internal code with its message as details", () => {
    const e = asCniError(new Error("ovsdb transaction failed"));
    assert.equal(e.code, 199);
    assert.equal(e.details, "ovsdb transaction failed");
    const typed = new CniError(101, "timed out waiting for ovn-installed");
    assert.equal(asCniError(typed), typed);
    assert.equal(asCniError("a string").details, "a string");
  });
});
