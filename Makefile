# zstack-ovn-kubernetes. `make test` installs what it needs and runs every test; `make sandbox` starts the sandbox.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE_TEST := node --import tsx --test --test-reporter=spec
TEST_FILES = $(shell find src test -name '*.test.ts' -not -path '*/node_modules/*' | sort)

.PHONY: help deps lint format typecheck unit test
help:
	@echo "make test      install dependencies, lint, typecheck and run every test"
	@echo "make sandbox   bring up the multi-node sandbox cluster"
	@echo "make lint | format | typecheck | models | bench-ovsdb"

deps:
	@hack/install-deps.sh

lint: deps
	npx biome check .

format:
	npx biome format --write .

typecheck: deps
	npx tsc --noEmit -p tsconfig.json

test: deps lint typecheck binaries
	$(NODE_TEST) --test-concurrency=2 $(TEST_FILES)

include $(wildcard mk/*.mk)
