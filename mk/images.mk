# Container images (docs/images.md): `make images` builds the product image zstack-ovn-kubernetes and the OVN
# central image zstack-ovn-central as OCI archives under $(ZOVN_CACHE)/images/ (default /var/cache/zstack-ovn),
# without Docker, and prints where they are; unchanged sources reuse the cached archives. It installs
# mmdebstrap and umoci with apt when they are missing. `make test-images` runs the image tests.
.PHONY: images images-print test-images

images: deps
	@hack/build-images.sh

images-print:
	@hack/build-images.sh --print

test-images: images
	@hack/run-tests.sh $(sort $(wildcard test/images/*.test.ts))

# The pause, busybox and CoreDNS images of the real-node sandbox (`zovn sandbox up --kubelet`, docs/sandbox.md):
# built from the pinned Kubernetes module's pause.c, Debian's busybox-static and CoreDNS from its Go module
# (hack/ensure-coredns.sh), cached like the others.
.PHONY: node-images node-images-print
node-images:
	@hack/build-node-images.sh

node-images-print:
	@hack/build-node-images.sh --print
