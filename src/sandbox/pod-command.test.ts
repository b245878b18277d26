import assert from "node:assert/strict";
import { test } from "node:test";
import { containerProcess, flagsForPorts } from "./pod-command.ts";

const pod = { name: "web-1", namespace: "default" };

test("declared ports become podserver listeners: UDP, http-named TCP as HTTP, other TCP as TCP", () => {
  assert.deepEqual(
    flagsForPorts([
      { containerPort: 8080 },
      { containerPort: 8081, protocol: "UDP" },
      { containerPort: 80, name: "http" },
      { containerPort: 9999, protocol: "SCTP" },
    ]),
    ["--tcp", "8080", "--udp", "8081", "--http", "80"],
  );
});

test("a container with ports runs podserver named after the pod", () => {
  const p = containerProcess({ name: "c", ports: [{ containerPort: 8080 }] }, pod, "/cache/podserver");
  assert.equal(p.command, "/cache/podserver");
  assert.deepEqual(p.args, ["--tcp", "8080", "--name", "web-1"]);
  assert.equal(p.env.POD_NAME, "web-1");
  assert.equal(p.env.POD_NAMESPACE, "default");
});

test("container args are podserver flags and win over ports", () => {
  const p = containerProcess(
    { name: "c", args: ["--http", "8080", "--name", "x"], ports: [{ containerPort: 1 }] },
    pod,
    "/ps",
  );
  assert.deepEqual(p.args, ["--http", "8080", "--name", "x"]);
});

test("a command naming another program runs that program from the machine with its args", () => {
  const p = containerProcess({ name: "c", command: ["sleep"], args: ["3600"] }, pod, "/ps");
  assert.equal(p.command, "sleep");
  assert.deepEqual(p.args, ["3600"]);
});

test("podserver's client mode is passed through without a server name", () => {
  const p = containerProcess({ name: "c", command: ["podserver", "dial", "tcp", "10.0.0.1:80"] }, pod, "/ps");
  assert.equal(p.command, "/ps");
  assert.deepEqual(p.args, ["dial", "tcp", "10.0.0.1:80"]);
});

test("a container with neither ports nor args just stays up, and literal env values are kept", () => {
  const p = containerProcess({ name: "c", env: [{ name: "A", value: "1" }, { name: "B" }] }, pod, "/ps");
  assert.deepEqual([p.command, ...p.args], ["sleep", "infinity"]);
  assert.equal(p.env.A, "1");
  assert.equal("B" in p.env, false);
});
