# The CNI executable (docs/cni.md): `make cni` builds dist/zstack-ovn-cni, a Node single executable that
# needs no node on the host; `make cni-startup` prints its size and how long one VERSION call takes.
.PHONY: cni cni-startup
CNI_BIN := dist/zstack-ovn-cni
CNI_SOURCES := $(wildcard src/cni/*.ts) src/cli/zstack-ovn-cni.ts tools/build-sea.ts package-lock.json
CNI_STARTUP_RUNS ?= 150

cni: deps $(CNI_BIN)

$(CNI_BIN): $(CNI_SOURCES)
	node --import tsx tools/build-sea.ts --out $@

cni-startup: cni
	node --import tsx tools/measure-startup.ts --runs $(CNI_STARTUP_RUNS) $(CNI_BIN)
