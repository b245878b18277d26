# Benchmarks print figures; they are not part of `make test`.
.PHONY: bench-ovsdb
bench-ovsdb: deps
	node --import tsx bench/ovsdb.ts $(BENCH_ARGS)
