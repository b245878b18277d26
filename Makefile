# zstack-ovn-kubernetes. `make test` installs what it needs and runs every test; `make sandbox` starts the sandbox.
SHELL := /bin/bash
.DEFAULT_GOAL := help
TEST_FILES = $(shell find src test -name '*.test.ts' -not -path '*/node_modules/*' | sort)

.PHONY: help deps lint format typecheck test
help:
	@echo "make test      install dependencies, lint, typecheck and run every test"
	@echo "make sandbox   bring up the sandbox cluster with the plugin and a demo workload"
	@echo "make images    build the container images (OCI archives, no Docker needed; docs/images.md)"
	@echo "make sandbox-down | lint | format | typecheck | models | binaries | cni"
	@echo "make bench-ovsdb | bench-controller | bench-cni | bench-services | bench-policy   (benchmarks, not part of make test)"
	@echo "make conformance | conformance-dry-run   (the upstream Kubernetes network e2e suites, not part of make test; docs/upstream-e2e.md)"

deps:
	@hack/install-deps.sh

lint: deps
	npx biome check .

format:
	npx biome format --write .

typecheck: deps
	npx tsc --noEmit -p tsconfig.json

# The Go fixtures' own tests run first (seconds), then every TypeScript test (test/images/ needs `images`,
# test/e2e/real-node.test.ts the kubelet from `binaries` and the pause, busybox and CoreDNS images from `node-images`,
# test/e2e/chart-install.test.ts those and the product and central images from `images`).
test: deps lint typecheck binaries test-fixtures images node-images
	@hack/run-tests.sh $(TEST_FILES)

include $(wildcard mk/*.mk)
