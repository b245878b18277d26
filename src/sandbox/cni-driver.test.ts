import assert from "node:assert/strict";
import { test } from "node:test";
import { cniArgs, driverArgs, resultIps } from "./cni-driver.ts";

const a = {
  containerId: "abc",
  netnsPath: "/run/netns/cni-1",
  ifname: "eth0",
  podNamespace: "default",
  podName: "web-1",
  podUid: "u-1",
};

test("CNI_ARGS carry the pod's namespace, name, infra container id and uid", () => {
  assert.equal(
    cniArgs(a),
    "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1",
  );
  assert.deepEqual(driverArgs("add", a).slice(0, 7), [
    "add",
    "--container-id",
    "abc",
    "--netns",
    "/run/netns/cni-1",
    "--ifname",
    "eth0",
  ]);
});

test("pod IPs come from a 1.x result's ips list and from a 0.2 result's ip4/ip6", () => {
  assert.deepEqual(
    resultIps({ cniVersion: "1.0.0", ips: [{ address: "10.244.1.5/24" }, { address: "fd00::5/64" }] }),
    ["10.244.1.5", "fd00::5"],
  );
  assert.deepEqual(resultIps({ cniVersion: "0.2.0", ip4: { ip: "10.244.2.7/24" } }), ["10.244.2.7"]);
  assert.deepEqual(resultIps({ cniVersion: "1.0.0" }), []);
});
