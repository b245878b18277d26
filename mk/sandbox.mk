# The sandbox cluster (docs/sandbox.md): `make sandbox` brings it up (idempotent) with zstack-ovnkube-controller
# and zstack-ovnkube-node running, deploys the demo workload and prints its connectivity matrix;
# `make sandbox-down` removes everything it created. SANDBOX_ARGS passes options to `up`, e.g.
# SANDBOX_ARGS="--nodes 5 --raft" or SANDBOX_ARGS="--encap geneve".
.PHONY: sandbox sandbox-down
SANDBOX_ARGS ?=

sandbox: deps binaries
	bin/zovn sandbox up $(SANDBOX_ARGS)
	bin/zovn sandbox demo

sandbox-down:
	bin/zovn sandbox down
