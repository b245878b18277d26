// zstack-ovn: the product image's one executable. It runs the program its name says (busybox style), so the
// controller, the node agent and the CNI shim share one Node runtime: the image holds one copy of Node
// instead of three (docs/images.md). The node agent copies it to the host as zstack-ovn-cni.
//
// Each program starts itself when its module is evaluated, so only the one named is imported.

import { basename } from "node:path";

export const PROGRAMS = ["zstack-ovnkube-controller", "zstack-ovnkube-node", "zstack-ovn-cni"] as const;

const name = basename(process.argv0);
if (name === "zstack-ovnkube-controller") void import("./zstack-ovnkube-controller.ts");
else if (name === "zstack-ovnkube-node") void import("./zstack-ovnkube-node.ts");
// zstack-ovn-cni-shim: the name the Go forwarder runs the shim by (docs/cni.md).
else if (name === "zstack-ovn-cni" || name === "zstack-ovn-cni-shim") void import("./zstack-ovn-cni.ts");
else {
  process.stderr.write(
    `zstack-ovn: run me as one of ${PROGRAMS.join(", ")} (a link or a copy with that name)\n`,
  );
  process.exitCode = 2;
}
