# Benchmarks print figures; they are not part of `make test`.
.PHONY: bench-ovsdb
bench-ovsdb: deps
	node --import tsx bench/ovsdb.ts $(BENCH_ARGS)

# The pod insert path of the OVSDB client alone (2,000 single-port transactions), for profiling; see docs/ovsdb.md.
.PHONY: bench-ovsdb-insert
bench-ovsdb-insert: deps
	node --import tsx bench/ovsdb-insert.ts $(BENCH_ARGS)

# zstack-ovnkube-controller vs a minimal patcher on a real apiserver and NB; --quick: 300 pods.
.PHONY: bench-controller
bench-controller: deps
	node --import tsx bench/controller.ts $(BENCH_ARGS)

# CNI ADD latency on one sandbox node (1, 10, 50 concurrent pods): agent steps, via the SEA shim, and a by-hand baseline.
.PHONY: bench-cni
bench-cni: deps
	node --import tsx bench/cni.ts $(BENCH_ARGS)

# Services: 2,000 Services x 10 endpoints into NB, endpoint churn, probe flip in a sandbox (zsbbench), controller
# RSS with 5,000 pods; each beside a raw baseline. --quick: 200 Services; --no-sandbox skips the probe flip.
.PHONY: bench-services
bench-services: deps binaries
	node --import tsx bench/services.ts $(BENCH_ARGS)

# NetworkPolicy: 100 namespaces x 10 pods with 1,000 policies into NB beside a raw baseline, pod relabel fan-out,
# probe flip in a sandbox (zsbnpbench), restart with no change. --quick: 20 namespaces; --no-sandbox skips the flip.
.PHONY: bench-policy
bench-policy: deps binaries
	node --import tsx bench/policy.ts $(BENCH_ARGS)
