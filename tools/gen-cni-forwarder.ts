// Writes cmd/zstack-ovn-cni-forwarder/constants.go from the TypeScript constants it mirrors.
//
//   node --import tsx tools/gen-cni-forwarder.ts

import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { FORWARDER_CONSTANTS_FILE, forwarderConstantsGo } from "../src/cni/forwarder-constants.ts";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
writeFileSync(join(repo, FORWARDER_CONSTANTS_FILE), forwarderConstantsGo());
