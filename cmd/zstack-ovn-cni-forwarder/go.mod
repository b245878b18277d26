// The CNI executable zstack-ovn-cni: a relay to the node agent's socket, standard library only (docs/cni.md).
module zstack-ovn-kubernetes/cmd/zstack-ovn-cni-forwarder

go 1.26.0
