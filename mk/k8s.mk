# Kubernetes machinery, observability, configuration and the Subnet CRD (docs/configuration.md,
# docs/subnet-crd.md). `make test-k8s` runs their unit tests and the integration tests against a real
# kube-apiserver (needs `make binaries` once).
.PHONY: test-k8s
K8S_TEST_FILES = $(shell find src/k8s src/observability src/config src/api test/integration/k8s -name '*.test.ts' | sort)

test-k8s: deps
	@hack/run-tests.sh $(K8S_TEST_FILES)
