# The sandbox cluster (docs/sandbox.md): `make sandbox` brings it up (idempotent) and ends with its nodes,
# chassis and a summary; `make sandbox-down` removes everything it created. SANDBOX_ARGS passes options to
# `up`, e.g. SANDBOX_ARGS="--nodes 5 --raft".
.PHONY: sandbox sandbox-down
SANDBOX_ARGS ?=

sandbox: deps
	bin/zovn sandbox up $(SANDBOX_ARGS)

sandbox-down:
	bin/zovn sandbox down
