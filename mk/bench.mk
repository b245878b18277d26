# Benchmarks print figures; they are not part of `make test`.
.PHONY: bench-ovsdb
bench-ovsdb: deps
	node --import tsx bench/ovsdb.ts $(BENCH_ARGS)

# zstack-ovnkube-controller vs a minimal patcher on a real apiserver and NB; --quick: 300 pods.
.PHONY: bench-controller
bench-controller: deps
	node --import tsx bench/controller.ts $(BENCH_ARGS)

# CNI ADD latency on one sandbox node (1, 10, 50 concurrent pods): agent steps, via the SEA shim, and a by-hand baseline.
.PHONY: bench-cni
bench-cni: deps
	node --import tsx bench/cni.ts $(BENCH_ARGS)
