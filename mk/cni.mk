# The CNI plugin (docs/cni.md): `make cni` puts dist/cni/zstack-ovn-cni (the Go forwarder, built and cached by
# hack/ensure-binaries.sh) and dist/cni/zstack-ovn-cni-shim (the TypeScript shim as a Node single executable,
# which the forwarder runs only when no agent can answer) together; `make cni-startup` prints per-call wall
# time, CPU and RSS of the forwarder and of the Node options (tools/measure-startup.ts).
.PHONY: cni cni-startup cni-constants
CNI_DIR := dist/cni
CNI_SOURCES := $(wildcard src/cni/*.ts) src/cli/zstack-ovn-cni.ts tools/build-sea.ts tools/build-cni.ts \
	$(wildcard cmd/zstack-ovn-cni-forwarder/*) package-lock.json
CNI_STARTUP_RUNS ?= 100

cni: deps $(CNI_DIR)/zstack-ovn-cni

$(CNI_DIR)/zstack-ovn-cni: $(CNI_SOURCES)
	node --import tsx tools/build-cni.ts --dir $(CNI_DIR)

# Rewrites cmd/zstack-ovn-cni-forwarder/constants.go after a change to the versions, socket or path in src/cni/.
cni-constants:
	node --import tsx tools/gen-cni-forwarder.ts

cni-startup: cni
	node --import tsx tools/measure-startup.ts --runs $(CNI_STARTUP_RUNS)
