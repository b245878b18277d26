# The upstream judge (docs/upstream-e2e.md), not part of `make test`. `make conformance` builds e2e.test, agnhost
# and the e2e test images from the pinned Kubernetes release (cached under $(ZOVN_CACHE), cache hits after the
# first time), brings up the real-node sandbox (`zovn sandbox up --kubelet`), runs the network suites selected
# by test/conformance/selection.json with JUnit output in $(CONFORMANCE_RESULTS), and regenerates
# docs/conformance.md. `make conformance-dry-run` needs no sandbox: it lists what would run, per group.
.PHONY: conformance conformance-dry-run conformance-build
CONFORMANCE_RESULTS ?= /var/tmp/zstack-ovn-conformance

conformance: deps
	CONFORMANCE_RESULTS=$(CONFORMANCE_RESULTS) hack/conformance.sh

conformance-dry-run: deps
	CONFORMANCE_RESULTS=$(CONFORMANCE_RESULTS) hack/conformance.sh --dry-run

conformance-build:
	@hack/ensure-e2e.sh
