import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, test } from "node:test";
import { layoutFor } from "./layout.ts";
import { Progress } from "./progress.ts";
import { saveState } from "./state.ts";
import { DEFAULT_SPEC } from "./topology.ts";
import { sandboxUp } from "./up.ts";

const base = mkdtempSync(join(tmpdir(), "zo-up-"));
after(() => rmSync(base, { recursive: true, force: true }));

test("up with a changed spec is refused while any state of the instance is left, daemons or not", async () => {
  const spec = { ...DEFAULT_SPEC, name: "zsbuptest" };
  const layout = layoutFor(spec.name, base);
  // What an interrupted `up` without --kubelet leaves: the state, no daemon recorded yet.
  saveState(layout, { version: 1, spec, runNetnsWasMounted: true, netns: [], daemons: [] });
  await assert.rejects(
    sandboxUp(
      { spec: { ...spec, kubelet: true }, explicit: new Set(["kubelet"] as const), baseDir: base },
      new Progress(new PassThrough()),
    ),
    /exists with .*run `zovn sandbox down` before changing it/,
  );
  // Refused before anything was made: the instance's folder holds its state and lock only.
  assert.deepEqual(
    readdirSync(layout.root).filter((f) => f !== "lock"),
    ["state.json"],
  );
});
