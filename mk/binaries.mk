# Go-built sandbox binaries (Kubernetes control plane, etcd, test fixtures); see docs/binaries.md.
.PHONY: binaries binaries-print test-fixtures

# Builds whatever is missing into $(ZOVN_CACHE) (default /var/cache/zstack-ovn) and prints
# KEY=/abs/path lines; the first build on an empty cache compiles Kubernetes and takes minutes.
binaries:
	@hack/ensure-binaries.sh

binaries-print:
	@hack/ensure-binaries.sh --print

# Unit tests of cni-driver and podserver (loopback only; a shell script plays the CNI plugin); vet of the forwarder.
test-fixtures:
	cd fixtures/cmd && go vet ./... && go test -count=1 ./...
	cd cmd/zstack-ovn-cni-forwarder && CGO_ENABLED=0 go vet ./...
