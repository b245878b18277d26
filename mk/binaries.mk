# Go-built sandbox binaries (Kubernetes control plane, etcd, test fixtures); see docs/binaries.md.
.PHONY: binaries binaries-print

# Builds whatever is missing into $(ZOVN_CACHE) (default /var/cache/zstack-ovn) and prints
# KEY=/abs/path lines; the first build on an empty cache compiles Kubernetes and takes minutes.
binaries:
	@hack/ensure-binaries.sh

binaries-print:
	@hack/ensure-binaries.sh --print
