import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { formatIp } from "../ipam/address.ts";
import { type Endpoint, hasTopologyHints, selectEndpoints } from "./endpoints.ts";
import type { ServicePortModel } from "./service-model.ts";

interface Ep {
  ip: string;
  node?: string;
  zones?: string[];
  nodes?: string[];
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

function slice(
  eps: Ep[],
  ports: { name?: string; protocol?: string; port?: number }[] = [
    { name: "http", protocol: "TCP", port: 8080 },
  ],
  addressType = "IPv4",
): V1EndpointSlice {
  return {
    addressType,
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      ...(e.node ? { nodeName: e.node } : {}),
      ...(e.zones || e.nodes
        ? {
            hints: {
              ...(e.zones ? { forZones: e.zones.map((name) => ({ name })) } : {}),
              ...(e.nodes ? { forNodes: e.nodes.map((name) => ({ name })) } : {}),
            },
          }
        : {}),
      conditions: {
        ...(e.ready === undefined ? {} : { ready: e.ready }),
        ...(e.serving === undefined ? {} : { serving: e.serving }),
        ...(e.terminating === undefined ? {} : { terminating: e.terminating }),
      },
    })),
    ports,
  } as V1EndpointSlice;
}

const http: ServicePortModel = { name: "http", protocol: "tcp", port: 80 };

describe("an EndpointSlice labelled service.kubernetes.io/headless", () => {
  it("gives no endpoints, whatever the label's value; other slices of the Service still count", () => {
    const plain = slice([{ ip: "10.244.0.5", node: "node1" }]);
    const headless = slice([{ ip: "10.244.0.6", node: "node1" }]);
    headless.metadata = { labels: { "service.kubernetes.io/headless": "" } };
    assert.deepEqual(
      selectEndpoints([headless], http).map((e) => formatIp(e.ip)),
      [],
    );
    assert.deepEqual(
      selectEndpoints([plain, headless], http).map((e) => formatIp(e.ip)),
      ["10.244.0.5"],
    );
    headless.metadata = { labels: { "service.kubernetes.io/headless": "yes" } };
    assert.deepEqual(selectEndpoints([headless], http, { node: "node1" }), []);
  });
});
const show = (eps: Endpoint[]) =>
  eps.map((e) => `${formatIp(e.ip)}:${e.port}${e.nodeName ? `@${e.nodeName}` : ""}`);

describe("selectEndpoints", () => {
  it("leaves out endpoints in special ranges: loopback, link-local metadata, multicast, unspecified", () => {
    const eps = selectEndpoints(
      [
        slice([
          { ip: "127.0.0.1" },
          { ip: "169.254.169.254" },
          { ip: "224.0.0.5" },
          { ip: "0.0.0.0" },
          { ip: "10.244.0.5" },
        ]),
        slice([{ ip: "::1" }, { ip: "fe80::1" }, { ip: "fd00::5" }], undefined, "IPv6"),
      ],
      http,
    );
    assert.deepEqual(show(eps), ["10.244.0.5:8080", "fd00::5:8080"]);
  });

  it("returns ready endpoints with the slice's port, sorted", () => {
    const s = slice([
      { ip: "10.244.0.9", node: "n2", ready: true },
      { ip: "10.244.0.3", node: "n1" },
    ]);
    assert.deepEqual(show(selectEndpoints([s], http)), ["10.244.0.3:8080@n1", "10.244.0.9:8080@n2"]);
  });

  it("resolves a named targetPort per slice: different numbers for different pods", () => {
    const a = slice([{ ip: "10.244.0.3" }], [{ name: "http", protocol: "TCP", port: 8080 }]);
    const b = slice([{ ip: "10.244.0.4" }], [{ name: "http", protocol: "TCP", port: 9090 }]);
    assert.deepEqual(show(selectEndpoints([a, b], http)), ["10.244.0.3:8080", "10.244.0.4:9090"]);
  });

  it("matches the slice port by name and protocol", () => {
    const s = slice(
      [{ ip: "10.244.0.3" }],
      [
        { name: "dns", protocol: "UDP", port: 5353 },
        { name: "dns", protocol: "TCP", port: 5354 },
        { name: "metrics", protocol: "TCP", port: 9100 },
      ],
    );
    assert.deepEqual(show(selectEndpoints([s], { name: "dns", protocol: "udp", port: 53 })), [
      "10.244.0.3:5353",
    ]);
    assert.deepEqual(show(selectEndpoints([s], { name: "dns", protocol: "tcp", port: 53 })), [
      "10.244.0.3:5354",
    ]);
    assert.deepEqual(selectEndpoints([s], { name: "other", protocol: "tcp", port: 1 }), []);
  });

  it("matches an unnamed Service port to an unnamed slice port with TCP as the default protocol", () => {
    const s = slice([{ ip: "10.244.0.3" }], [{ port: 8080 }]);
    assert.deepEqual(show(selectEndpoints([s], { name: "", protocol: "tcp", port: 80 })), [
      "10.244.0.3:8080",
    ]);
  });

  it("leaves out terminating endpoints while a ready one exists", () => {
    const s = slice([
      { ip: "10.244.0.3", ready: true },
      { ip: "10.244.0.4", ready: false, serving: true, terminating: true },
    ]);
    assert.deepEqual(show(selectEndpoints([s], http)), ["10.244.0.3:8080"]);
  });

  it("falls back to serving terminating endpoints when none is ready, never to non-serving ones", () => {
    const s = slice([
      { ip: "10.244.0.4", ready: false, serving: true, terminating: true },
      { ip: "10.244.0.5", ready: false, serving: false, terminating: true },
      { ip: "10.244.0.6", ready: false, serving: false },
    ]);
    assert.deepEqual(show(selectEndpoints([s], http)), ["10.244.0.4:8080"]);
  });

  it("returns nothing when every endpoint is unready and not terminating", () => {
    assert.deepEqual(selectEndpoints([slice([{ ip: "10.244.0.3", ready: false }])], http), []);
  });

  it("applies the rule to one node's endpoints with the node option", () => {
    const s = slice([
      { ip: "10.244.0.3", node: "n1", ready: true },
      { ip: "10.244.0.4", node: "n2", ready: false, serving: true, terminating: true },
      { ip: "10.244.0.5", node: "n2", ready: false, serving: false, terminating: true },
    ]);
    assert.deepEqual(show(selectEndpoints([s], http, { node: "n1" })), ["10.244.0.3:8080@n1"]);
    // n2 has no ready endpoint: its serving-terminating one is used, although n1 has a ready one.
    assert.deepEqual(show(selectEndpoints([s], http, { node: "n2" })), ["10.244.0.4:8080@n2"]);
    assert.deepEqual(selectEndpoints([s], http, { node: "n3" }), []);
  });

  it("reads IPv6 slices and skips FQDN slices", () => {
    const v6 = slice([{ ip: "FD00:10:244::5" }], undefined, "IPv6");
    const fqdn = slice([{ ip: "example.com" }], undefined, "FQDN");
    assert.deepEqual(show(selectEndpoints([v6, fqdn], http)), ["fd00:10:244::5:8080"]);
  });

  it("skips malformed addresses, addresses of the wrong family and slices with a bad port", () => {
    const s = slice([{ ip: "10.244.0.300" }, { ip: "fd00::1" }, { ip: "10.244.0.3" }]);
    const badPort = slice([{ ip: "10.244.0.7" }], [{ name: "http", protocol: "TCP", port: 70000 }]);
    const noPort = slice([{ ip: "10.244.0.8" }], [{ name: "http", protocol: "TCP" }]);
    assert.deepEqual(show(selectEndpoints([s, badPort, noPort], http)), ["10.244.0.3:8080"]);
  });

  it("lists an endpoint present in two slices once, as ready if either copy is", () => {
    const a = slice([{ ip: "10.244.0.3", ready: false }]);
    const b = slice([{ ip: "10.244.0.3", ready: true }]);
    assert.deepEqual(show(selectEndpoints([a, b], http)), ["10.244.0.3:8080"]);
  });
});

describe("selectEndpoints with topology hints (kube-proxy's choice for a client's node)", () => {
  const zoned = slice([
    { ip: "10.244.1.2", node: "n1", zones: ["a"], nodes: ["n1"] },
    { ip: "10.244.2.2", node: "n2", zones: ["b"], nodes: ["n2"] },
    { ip: "10.244.3.2", node: "n3", zones: ["b"], nodes: ["n3"] },
  ]);

  it("prefers the endpoints hinted for the client's node when every ready endpoint has node hints", () => {
    assert.deepEqual(show(selectEndpoints([zoned], http, { topology: { node: "n2", zone: "b" } })), [
      "10.244.2.2:8080@n2",
    ]);
  });

  it("falls back to zone hints when no endpoint is hinted for the node", () => {
    assert.deepEqual(show(selectEndpoints([zoned], http, { topology: { node: "n4", zone: "b" } })), [
      "10.244.2.2:8080@n2",
      "10.244.3.2:8080@n3",
    ]);
  });

  it("uses every endpoint when the node's zone is unknown or has no hinted endpoint", () => {
    const all = ["10.244.1.2:8080@n1", "10.244.2.2:8080@n2", "10.244.3.2:8080@n3"];
    assert.deepEqual(show(selectEndpoints([zoned], http, { topology: { node: "n4" } })), all);
    assert.deepEqual(show(selectEndpoints([zoned], http, { topology: { node: "n4", zone: "c" } })), all);
  });

  it("ignores hints unless every ready endpoint has them (not-ready ones do not count)", () => {
    const partial = slice([
      { ip: "10.244.1.2", node: "n1", zones: ["a"] },
      { ip: "10.244.2.2", node: "n2" },
      { ip: "10.244.3.2", node: "n3", ready: false },
    ]);
    assert.deepEqual(show(selectEndpoints([partial], http, { topology: { node: "n1", zone: "a" } })), [
      "10.244.1.2:8080@n1",
      "10.244.2.2:8080@n2",
    ]);
    const notReadyUnhinted = slice([
      { ip: "10.244.1.2", node: "n1", zones: ["a"] },
      { ip: "10.244.2.2", node: "n2", zones: ["b"] },
      { ip: "10.244.3.2", node: "n3", ready: false },
    ]);
    assert.deepEqual(
      show(selectEndpoints([notReadyUnhinted], http, { topology: { node: "n1", zone: "a" } })),
      ["10.244.1.2:8080@n1"],
    );
  });

  it("applies the hints to serving-and-terminating endpoints when none is ready", () => {
    const terminating = slice([
      { ip: "10.244.1.2", node: "n1", zones: ["a"], ready: false, serving: true, terminating: true },
      { ip: "10.244.2.2", node: "n2", zones: ["b"], ready: false, serving: true, terminating: true },
    ]);
    // No ready endpoint: kube-proxy's topology mode is none, so every serving one is used.
    assert.deepEqual(show(selectEndpoints([terminating], http, { topology: { node: "n1", zone: "a" } })), [
      "10.244.1.2:8080@n1",
      "10.244.2.2:8080@n2",
    ]);
  });

  it("tells whether slices carry any hint", () => {
    assert.equal(hasTopologyHints([zoned]), true);
    assert.equal(hasTopologyHints([slice([{ ip: "10.244.1.2", node: "n1" }])]), false);
  });
});

describe("endpoint addresses parsed once across slice objects", () => {
  it("gives every slice object the same choice as the first, across more addresses than one cache generation", () => {
    const addr = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const special = ["127.0.0.1", "169.254.169.254", "224.0.0.1", "0.0.0.0", "10.0.0.01", "fd00::1"];
    const pick = (ips: string[]) =>
      selectEndpoints([slice(ips.map((ip) => ({ ip })))], http).map((e) => formatIp(e.ip));
    const first = pick(["10.0.0.1", ...special]);
    assert.deepEqual(first, ["10.0.0.1"]);
    // 40,000 other addresses turn the cache over more than twice; then the same texts, in new objects.
    for (let i = 0; i < 40_000; i += 100)
      assert.equal(pick(Array.from({ length: 100 }, (_, k) => addr(65_536 + i + k))).length, 100);
    assert.deepEqual(pick(["10.0.0.1", ...special]), first);
    assert.deepEqual(pick([...special, "10.0.0.1"]), first);
    // A slice of the other family reads the same cached text as no endpoint of its own.
    assert.deepEqual(
      selectEndpoints([slice([{ ip: "10.0.0.1" }, { ip: "fd00::5" }], undefined, "IPv6")], http).map((e) =>
        formatIp(e.ip),
      ),
      ["fd00::5"],
    );
  });
});
