# The Helm chart (deploy/helm/zstack-ovn-kubernetes) and the plain manifests rendered from it
# (deploy/manifests); docs/deployment.md. helm and kubeconform come from `make binaries`.
.PHONY: manifests test-chart
CHART_TEST_FILES = $(shell find test/integration/chart test/rig/kube-json-schemas.test.ts -name '*.test.ts' | sort)

# Regenerates deploy/manifests/ from the chart; test/integration/chart checks they are up to date.
manifests: binaries
	@hack/render-manifests.sh

test-chart: deps binaries
	@hack/run-tests.sh $(CHART_TEST_FILES)

# Regenerates the generated tables of docs/configuration.md: chart values from values.schema.json and values.yaml,
# the controller's and the node agent's settings from their settings tables.
.PHONY: docs-chart
docs-chart: deps
	node --import tsx tools/chart-values-doc.ts
	node --import tsx tools/settings-doc.ts
