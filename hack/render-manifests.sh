#!/usr/bin/env bash
# Renders the Helm chart into plain manifests for users without Helm: one file per deployment mode, in the
# kube-system namespace, CRD included.
#
#   hack/render-manifests.sh [DIR]   write DIR/{standalone,standalone-ha,external}.yaml (default deploy/manifests)
#
# Uses the helm that hack/ensure-binaries.sh builds; renders for the Kubernetes release the repository pins.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chart=$repo/deploy/helm/zstack-ovn-kubernetes
out=${1:-$repo/deploy/manifests}

helm=${HELM:-}
if [[ -z $helm ]]; then
	lines=$("$repo/hack/ensure-binaries.sh" --print 2>/dev/null || "$repo/hack/ensure-binaries.sh")
	helm=$(sed -n 's/^HELM=//p' <<<"$lines")
fi
[[ -x $helm ]] || {
	echo "render-manifests: no helm (run make binaries)" >&2
	exit 1
}
kube_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$repo/fixtures/k8s/go.mod")

mkdir -p "$out"
for mode in standalone standalone-ha external; do
	{
		echo "# Rendered from deploy/helm/zstack-ovn-kubernetes with values-$mode.yaml by hack/render-manifests.sh"
		echo "# (make manifests). Do not edit: change the chart and render again. Namespace kube-system."
		"$helm" template zstack-ovn-kubernetes "$chart" --namespace kube-system --include-crds \
			--kube-version "$kube_version" -f "$chart/values-$mode.yaml"
	} >"$out/$mode.yaml.tmp"
	mv -f "$out/$mode.yaml.tmp" "$out/$mode.yaml"
done
