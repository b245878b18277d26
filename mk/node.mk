# The node agent's networking (docs/node-agent.md): unit tests, the OVS node rig, and integration tests with
# real OVS/OVN in network namespaces the tests create and remove.
.PHONY: test-node
test-node: deps
	@hack/run-tests.sh src/node/*.test.ts test/rig/ovs-node.test.ts test/integration/node/*.test.ts
