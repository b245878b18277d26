import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { FORWARDER_CONSTANTS_FILE, forwarderConstantsGo } from "./forwarder-constants.ts";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

describe("the Go forwarder's constants", () => {
  it("are the ones the TypeScript source holds (run tools/gen-cni-forwarder.ts after changing them)", () => {
    assert.equal(readFileSync(join(repo, FORWARDER_CONSTANTS_FILE), "utf8"), forwarderConstantsGo());
  });
});
