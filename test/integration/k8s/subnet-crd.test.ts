// The Subnet CRD in a real apiserver: valid Subnets of every protocol are accepted, each malformed one is
// refused at apply time with a message naming the field and the fix, and `kubectl get sn` has its columns.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ApiextensionsV1Api } from "@kubernetes/client-node";
import {
  newSubnet,
  SUBNET_PATH,
  type Subnet,
  type SubnetSpec,
  subnetStatus,
} from "../../../src/api/subnet.ts";
import { SubnetClient } from "../../../src/api/subnet-client.ts";
import { ApiClient, ApiError } from "../../../src/k8s/api-client.ts";
import { Informer } from "../../../src/k8s/informer.ts";
import { repoRoot } from "../../../src/sandbox/repo.ts";
import { type KubeApiserver, startKubeApiserver } from "../../rig/kube-apiserver.ts";
import { eventually } from "./cluster-objects.ts";

const CRD = join(repoRoot, "deploy", "crds", "subnet.network.zstack.io.yaml");

let kube: KubeApiserver;
let subnets: SubnetClient;
let seq = 0;

async function refusal(spec: Partial<SubnetSpec> & Record<string, unknown>): Promise<string> {
  const name = `bad-${++seq}`;
  try {
    await subnets.create(newSubnet(name, spec as SubnetSpec));
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 422, err.message);
    return err.message;
  }
  await subnets.delete(name);
  assert.fail(`Subnet ${JSON.stringify(spec)} was accepted`);
}

before(async () => {
  kube = await startKubeApiserver();
  subnets = new SubnetClient(kube.kubeConfig);
  await kube.kubectl(["apply", "-f", CRD]);
  await kube.kubectl([
    "wait",
    "--for=condition=Established",
    "crd/subnets.network.zstack.io",
    "--timeout=30s",
  ]);
  await eventually("Subnet resource served", async () => (await subnets.list()).length >= 0, 10_000, 200);
});

after(() => kube?.stop());

describe("Subnet CRD", () => {
  const valid: Array<[string, SubnetSpec]> = [
    [
      "ipv4",
      {
        cidr: "10.244.0.0/16",
        gateway: "10.244.0.1",
        excludeIPs: [
          "10.244.0.1",
          "10.244.0.2-10.244.0.10",
          "10.244.1.0..10.244.1.255",
          "10.244.0.9-10.244.0.10",
        ],
        namespaces: ["default", "team-a"],
        default: true,
      },
    ],
    [
      "ipv6",
      {
        cidr: "fd00:10:244::/64",
        gateway: "fd00:10:244::1",
        protocol: "IPv6",
        excludeIPs: [
          "fd00:10:244::2-fd00:10:244::ff",
          "fd00:10:244::9..fd00:10:244::10",
          "fd00:10:244::ff-fd00:10:244::1:0",
        ],
      },
    ],
    [
      "dual",
      {
        cidr: "10.245.0.0/16,fd00:10:245::/64",
        gateway: "10.245.0.1,fd00:10:245::1",
        protocol: "Dual",
        excludeIPs: ["10.245.0.2-10.245.0.9", "fd00:10:245::2..fd00:10:245::9", "fd00:10:245::ffff"],
      },
    ],
    [
      "dual-v6-first",
      { cidr: "fd00:10:246::/64,10.246.0.0/24", gateway: "fd00:10:246::1,10.246.0.1", protocol: "Dual" },
    ],
    [
      "underlay",
      {
        cidr: "192.168.100.0/24",
        gateway: "192.168.100.254",
        vlanID: 4094,
        provider: "provider-net1",
        externalLogicalSwitch: "ls-zstack-vpc-subnet-uuid",
        excludeIPs: ["192.168.100.1", "192.168.100.100-192.168.100.200"],
      },
    ],
    ["small", { cidr: "10.250.0.0/30", gateway: "10.250.0.1", vlanID: 1 }],
  ];

  for (const [name, spec] of valid) {
    it(`accepts a valid ${name} Subnet`, async () => {
      const created = await subnets.create(newSubnet(name, spec));
      assert.equal(created.spec.cidr, spec.cidr);
      assert.equal(created.spec.protocol, spec.protocol ?? "IPv4", "protocol defaults to IPv4");
    });
  }

  const invalid: Array<[string, Record<string, unknown>, string]> = [
    [
      "a CIDR with a bad prefix",
      { cidr: "10.244.0.0/33", gateway: "10.244.0.1" },
      'spec.cidr: Invalid value: "10.244.0.0/33": cidr "10.244.0.0/33" is not a CIDR',
    ],
    [
      "a CIDR that is not an address",
      { cidr: "10.244.0/16", gateway: "10.244.0.1" },
      'cidr "10.244.0/16" is not a CIDR: write a network address and prefix length such as 10.244.0.0/16',
    ],
    [
      "a CIDR with host bits",
      { cidr: "10.244.0.1/16", gateway: "10.244.0.2" },
      'cidr "10.244.0.1/16" has host bits set: use the network address',
    ],
    [
      "a CIDR too small for pods",
      { cidr: "10.244.0.0/31", gateway: "10.244.0.1" },
      "use a prefix of at most /30 (IPv4) or /126 (IPv6)",
    ],
    [
      "three CIDRs",
      { cidr: "10.1.0.0/16,10.2.0.0/16,10.3.0.0/16", gateway: "10.1.0.1" },
      "lists more than two CIDRs",
    ],
    [
      "a CIDR with a space",
      { cidr: "10.245.0.0/16, fd00::/64", gateway: "10.245.0.1,fd00::1", protocol: "Dual" },
      "no spaces",
    ],
    [
      "a malformed gateway",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.256" },
      'spec.gateway: Invalid value: "10.244.0.256": gateway "10.244.0.256" is not an IP address',
    ],
    [
      "a gateway outside the CIDR",
      { cidr: "10.244.0.0/16", gateway: "10.245.0.1" },
      'spec.gateway: Invalid value: gateway "10.245.0.1" is not inside cidr "10.244.0.0/16": give one gateway address inside each CIDR',
    ],
    [
      "the network address as gateway",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.0" },
      'gateway "10.244.0.0" is the network address of cidr "10.244.0.0/16": use a host address',
    ],
    [
      "an IPv6 network address as gateway",
      { cidr: "fd00::/64", gateway: "fd00::", protocol: "IPv6" },
      "is the network address of cidr",
    ],
    [
      "a malformed exclude",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.300"] },
      'spec.excludeIPs[0]: Invalid value: "10.244.0.300": excludeIPs entry "10.244.0.300" is not an IP address or a range',
    ],
    [
      "an open-ended range",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.5", "10.244.0.5-"] },
      'spec.excludeIPs[1]: Invalid value: "10.244.0.5-": excludeIPs entry "10.244.0.5-" is not an IP address or a range',
    ],
    [
      "a range with three ends",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.1-10.244.0.5-10.244.0.9"] },
      "is not an IP address or a range",
    ],
    [
      "a reversed range",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.10-10.244.0.2"] },
      'excludeIPs range "10.244.0.10-10.244.0.2" is reversed: write the lower address first, 10.244.0.2-10.244.0.10',
    ],
    [
      "a reversed range that sorts right as text",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.10..10.244.0.9"] },
      "write the lower address first, 10.244.0.9..10.244.0.10",
    ],
    [
      "a reversed IPv6 range",
      { cidr: "fd00::/64", gateway: "fd00::1", protocol: "IPv6", excludeIPs: ["fd00::10-fd00::f"] },
      'excludeIPs range "fd00::10-fd00::f" is reversed',
    ],
    [
      "a reversed IPv6 range across groups",
      { cidr: "fd00::/64", gateway: "fd00::1", protocol: "IPv6", excludeIPs: ["fd00::1:0-fd00::ffff"] },
      "is reversed",
    ],
    [
      "a range mixing families",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.1-fd00::1"] },
      'excludeIPs range "10.244.0.1-fd00::1" mixes IPv4 and IPv6',
    ],
    [
      "an exclude outside the CIDR",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.5", "10.245.0.1"] },
      'spec.excludeIPs: Invalid value: excludeIPs entry "10.245.0.1" is not inside cidr "10.244.0.0/16": exclude only addresses inside the cidr',
    ],
    [
      "a range leaving the CIDR",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.255.250-10.245.0.5"] },
      'excludeIPs entry "10.244.255.250-10.245.0.5" is not inside cidr',
    ],
    [
      "protocol IPv6 with an IPv4 CIDR",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", protocol: "IPv6" },
      'spec.cidr: Invalid value: cidr "10.244.0.0/16" does not match protocol IPv6: give one IPv6 CIDR, or set protocol to IPv4',
    ],
    [
      "the default protocol with an IPv6 CIDR",
      { cidr: "fd00::/64", gateway: "fd00::1" },
      "does not match protocol IPv4: give one IPv4 CIDR, or set protocol to IPv6",
    ],
    [
      "protocol IPv4 with two CIDRs",
      { cidr: "10.245.0.0/16,fd00::/64", gateway: "10.245.0.1,fd00::1" },
      "or set protocol to Dual",
    ],
    [
      "protocol Dual with one CIDR",
      { cidr: "10.245.0.0/16", gateway: "10.245.0.1", protocol: "Dual" },
      "does not match protocol Dual: give one IPv4 and one IPv6 CIDR separated by a comma",
    ],
    [
      "protocol Dual with two IPv4 CIDRs",
      { cidr: "10.245.0.0/16,10.246.0.0/16", gateway: "10.245.0.1,10.246.0.1", protocol: "Dual" },
      "does not match protocol Dual",
    ],
    [
      "Dual with one gateway",
      { cidr: "10.245.0.0/16,fd00::/64", gateway: "10.245.0.1", protocol: "Dual" },
      "give one gateway address inside each CIDR, the IPv4 and the IPv6 one separated by a comma",
    ],
    [
      "Dual with both gateways in one family",
      { cidr: "10.245.0.0/16,fd00::/64", gateway: "10.245.0.1,10.245.0.2", protocol: "Dual" },
      "is not inside cidr",
    ],
    [
      "a VLAN of 0",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", vlanID: 0 },
      "spec.vlanID: Invalid value: 0: spec.vlanID in body should be greater than or equal to 1",
    ],
    [
      "a VLAN above 4094",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", vlanID: 4095 },
      "spec.vlanID: Invalid value: 4095: spec.vlanID in body should be less than or equal to 4094",
    ],
    [
      "an unknown protocol",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", protocol: "IPv5" },
      'spec.protocol: Unsupported value: "IPv5": supported values: "IPv4", "IPv6", "Dual"',
    ],
    ["no gateway", { cidr: "10.244.0.0/16" }, "spec.gateway: Required value"],
    [
      "a namespace that is not a name",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", namespaces: ["Team_A"] },
      "spec.namespaces[0]: Invalid value",
    ],
    [
      "a duplicated exclude",
      { cidr: "10.244.0.0/16", gateway: "10.244.0.1", excludeIPs: ["10.244.0.5", "10.244.0.5"] },
      'spec.excludeIPs[1]: Duplicate value: "10.244.0.5"',
    ],
  ];

  for (const [what, spec, expected] of invalid) {
    it(`refuses ${what}`, async () => {
      const message = await refusal(spec);
      assert.ok(message.includes(expected), `expected "${expected}" in:\n${message}`);
    });
  }

  it("accepts the largest allowed list of excludes within the CEL cost budget", async () => {
    const excludeIPs = Array.from({ length: 128 }, (_, i) =>
      i < 64
        ? `fd00:10:247::${(i * 2).toString(16)}-fd00:10:247::${(i * 2 + 1).toString(16)}:ffff`
        : `10.247.${i - 64}.1..10.247.${i - 64}.200`,
    );
    const created = await subnets.create(
      newSubnet("max-excludes", {
        cidr: "10.247.0.0/16,fd00:10:247::/64",
        gateway: "10.247.0.254,fd00:10:247::ffff:1",
        protocol: "Dual",
        excludeIPs,
      }),
    );
    assert.equal(created.spec.excludeIPs?.length, 128);
    const tooMany = await refusal({
      cidr: "10.248.0.0/16",
      gateway: "10.248.0.1",
      excludeIPs: [...Array.from({ length: 128 }, (_, i) => `10.248.${i}.9`), "10.248.200.9"],
    });
    assert.match(tooMany, /spec.excludeIPs: Too many: 129: must have at most 128 items/);
  });

  it("refuses changes to cidr, gateway, protocol and externalLogicalSwitch, naming the field and the way out, and takes other edits", async () => {
    await subnets.create(
      newSubnet("immutable", { cidr: "10.81.0.0/24", gateway: "10.81.0.1", namespaces: ["a"] }),
    );
    const api = new ApiClient(kube.kubeConfig);
    try {
      const patch = (spec: Record<string, unknown>) =>
        api.request(`${SUBNET_PATH}/immutable`, { method: "PATCH", body: { spec } });
      const refused = async (spec: Record<string, unknown>, text: string) => {
        await assert.rejects(patch(spec), (e: unknown) => {
          assert.ok(e instanceof ApiError, String(e));
          assert.equal(e.status, 422, e.message);
          assert.match(e.message, new RegExp(text));
          return true;
        });
      };
      await refused({ cidr: "10.81.0.0/23" }, "spec.cidr: .*cidr is immutable: .*create a new Subnet");
      await refused({ gateway: "10.81.0.254" }, "spec.gateway: .*gateway is immutable");
      await refused(
        { protocol: "Dual", cidr: "10.81.0.0/24,fd00:81::/64", gateway: "10.81.0.1,fd00:81::1" },
        "protocol is immutable",
      );
      // A Subnet of its own does not move onto ZStack's switch, nor one on ZStack's switch to another or off it.
      await refused(
        { externalLogicalSwitch: "zstack-l3" },
        "externalLogicalSwitch cannot be added or removed",
      );
      await subnets.create(
        newSubnet("immutable-ext", {
          cidr: "10.82.0.0/24",
          gateway: "10.82.0.1",
          externalLogicalSwitch: "zs-a",
        }),
      );
      const patchExt = (spec: Record<string, unknown>) =>
        api.request(`${SUBNET_PATH}/immutable-ext`, { method: "PATCH", body: { spec } });
      for (const [spec, text] of [
        [
          { externalLogicalSwitch: "zs-b" },
          "spec.externalLogicalSwitch: .*externalLogicalSwitch is immutable: .*create a new Subnet",
        ],
        [{ externalLogicalSwitch: null }, "externalLogicalSwitch cannot be added or removed"],
      ] as const)
        await assert.rejects(patchExt(spec), (e: unknown) => {
          assert.ok(e instanceof ApiError, String(e));
          assert.equal(e.status, 422, e.message);
          assert.match(e.message, new RegExp(text));
          return true;
        });
      await api.request(`${SUBNET_PATH}/immutable-ext`, { method: "DELETE" });
      // Everything else stays editable: namespaces and excluded addresses change what new pods get.
      await patch({ namespaces: ["a", "b"], excludeIPs: ["10.81.0.10"] });
      const now = await api.request<Subnet>(`${SUBNET_PATH}/immutable`);
      assert.deepEqual(now.spec.namespaces, ["a", "b"]);
      assert.equal(now.spec.cidr, "10.81.0.0/24");
    } finally {
      api.close();
    }
  });

  it("declares the printer columns kubectl get sn shows", async () => {
    const api = kube.kubeConfig.makeApiClient(ApiextensionsV1Api);
    const crd = await api.readCustomResourceDefinition({ name: "subnets.network.zstack.io" });
    assert.deepEqual(crd.spec.names.shortNames, ["sn"]);
    assert.equal(crd.spec.scope, "Cluster");
    const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? [];
    const shown = columns.filter((c) => !c.priority).map((c) => [c.name, c.jsonPath]);
    assert.deepEqual(shown, [
      ["CIDR", ".spec.cidr"],
      ["Gateway", ".spec.gateway"],
      ["Used", ".status.usedIPs"],
      ["Available", ".status.availableIPs"],
      ["Phase", ".status.phase"],
      ["Age", ".metadata.creationTimestamp"],
    ]);
    const out = await kube.kubectl(["get", "sn", "ipv4"]);
    assert.match(out.split("\n")[0] ?? "", /^NAME\s+CIDR\s+GATEWAY\s+USED\s+AVAILABLE\s+PHASE\s+AGE$/);
    assert.match(out.split("\n")[1] ?? "", /^ipv4\s+10\.244\.0\.0\/16\s+10\.244\.0\.1\s/);
    const wide = await kube.kubectl(["get", "sn", "underlay", "-o", "wide"]);
    assert.match(wide, /PROTOCOL\s+VLAN\s+PROVIDER\s+DEFAULT\s+LOGICALSWITCH/);
  });

  it("writes status through the status subresource and shows it in the columns", async () => {
    const subnet = await subnets.get("ipv4");
    assert.ok(subnet);
    const status = subnetStatus(
      subnet,
      { phase: "Active", reason: "LogicalSwitchReady", message: "logical switch subnet-ipv4 is ready" },
      { usedIPs: 3, availableIPs: 65_518, portCapacity: 65_521, logicalSwitch: "subnet-ipv4" },
    );
    const updated = await subnets.patchStatus("ipv4", status);
    assert.equal(updated.status?.phase, "Active");
    assert.equal(updated.status?.conditions?.[0]?.status, "True");
    assert.equal(updated.status?.observedGeneration, subnet.metadata.generation);
    const out = await kube.kubectl(["get", "sn", "ipv4", "--no-headers"]);
    assert.match(out, /^ipv4\s+10\.244\.0\.0\/16\s+10\.244\.0\.1\s+3\s+65518\s+Active\s/);

    // A status replace from a stale read is refused rather than overwriting a newer status.
    const stale = {
      ...updated,
      metadata: { ...updated.metadata, resourceVersion: subnet.metadata.resourceVersion },
    };
    await assert.rejects(
      subnets.replaceStatus(stale),
      (err: unknown) => err instanceof ApiError && err.status === 409,
    );
    // Status writes do not touch the spec, and spec writes through the main resource cannot set status.
    assert.deepEqual((await subnets.get("ipv4"))?.spec, subnet.spec);
  });

  it("an informer over the CRD path sees Subnets come and go", async () => {
    const inf = new Informer<Subnet>({ client: new ApiClient(kube.kubeConfig), path: SUBNET_PATH });
    inf.start();
    after(() => inf.stop());
    await inf.waitForSync();
    assert.ok(inf.get("ipv4"), "cluster-scoped objects are keyed by name");
    await subnets.create(newSubnet("watched", { cidr: "10.249.0.0/24", gateway: "10.249.0.1" }));
    await eventually("informer sees the new Subnet", () => inf.get("watched") !== undefined);
    assert.equal(inf.get("watched")?.kind, "Subnet");
    await subnets.delete("watched");
    await eventually("informer sees the deletion", () => inf.get("watched") === undefined);
  });
});
