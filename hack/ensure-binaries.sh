#!/usr/bin/env bash
# Builds the sandbox's Go binaries (Kubernetes control plane, etcd, test fixtures, the chart's
# tools helm and kubeconform, and the product's CNI forwarder) from the Go
# module proxy into a cache outside the repository, keyed by version, and prints where they are.
#
#   hack/ensure-binaries.sh          build what is missing, then print KEY=/abs/path lines
#   hack/ensure-binaries.sh --print  print the lines only; exit 1 if anything is not built yet
#
# stdout carries only the KEY=path lines, so callers can eval or parse it; progress goes to stderr.
# Environment: ZOVN_CACHE (cache root, default /var/cache/zstack-ovn), ZOVN_BUILD_JOBS (go build
# -p, default the number of CPUs), GO (the go command).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fixtures=$repo/fixtures
GO=${GO:-go}
progress_every=30

# shellcheck source=hack/lib.sh
source "$repo/hack/lib.sh"
hack_cli ensure-binaries 2,10p "$@"

command -v "$GO" >/dev/null || die "no '$GO' on PATH; Go >= 1.26 is needed"

# The pinned versions live in the tools modules' go.mod files, so bumping a version there is the
# one edit that also moves the cache key.
module_version() {
	awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod"
}
k8s_version=$(module_version "$fixtures/k8s" k8s.io/kubernetes)
etcd_version=$(module_version "$fixtures/etcd" go.etcd.io/etcd/server/v3)
helm_version=$(module_version "$fixtures/helm" helm.sh/helm/v3)
kubeconform_version=$(module_version "$fixtures/kubeconform" github.com/yannh/kubeconform)
[[ -n $k8s_version && -n $etcd_version && -n $helm_version && -n $kubeconform_version ]] ||
	die "cannot read pinned versions from fixtures/*/go.mod"

# Any change to a fixture's source or pinned dependencies must yield a new directory, never a
# stale binary, and hashing the files is cheaper than asking go for a build ID.
source_hash() (
	cd "$1"
	find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
)
fixtures_hash=$(source_hash "$fixtures/cmd")
# The CNI forwarder is product code (docs/cni.md): standard library only, so it needs no module proxy.
forwarder_src=$repo/cmd/zstack-ovn-cni-forwarder
forwarder_hash=$(source_hash "$forwarder_src")

hack_cache_root
mkdir -p "$cache_root" 2>/dev/null || [[ $mode == print ]] || die "cannot create cache directory $cache_root"
cache_root=$(cd "$cache_root" 2>/dev/null && pwd || echo "$cache_root")

k8s_dir=$cache_root/kubernetes-$k8s_version
etcd_dir=$cache_root/etcd-$etcd_version
fixtures_dir=$cache_root/fixtures-$fixtures_hash
helm_dir=$cache_root/helm-$helm_version
kubeconform_dir=$cache_root/kubeconform-$kubeconform_version
forwarder_dir=$cache_root/cni-forwarder-$forwarder_hash

outputs=(
	"KUBE_APISERVER=$k8s_dir/kube-apiserver"
	"KUBE_CONTROLLER_MANAGER=$k8s_dir/kube-controller-manager"
	"KUBE_SCHEDULER=$k8s_dir/kube-scheduler"
	"KUBECTL=$k8s_dir/kubectl"
	"KUBELET=$k8s_dir/kubelet"
	"ETCD=$etcd_dir/etcd"
	"CNI_DRIVER=$fixtures_dir/cni-driver"
	"PODSERVER=$fixtures_dir/podserver"
	"CNITOOL=$fixtures_dir/cnitool"
	"HELM=$helm_dir/helm"
	"KUBECONFORM=$kubeconform_dir/kubeconform"
	"CNI_FORWARDER=$forwarder_dir/zstack-ovn-cni"
)

all_present() {
	local dir=$1 name
	shift
	for name in "$@"; do
		[[ -x $dir/$name ]] || return 1
	done
}

print_outputs() {
	local line missing=0
	for line in "${outputs[@]}"; do
		if [[ ! -x ${line#*=} ]]; then
			log "missing ${line#*=}"
			missing=1
		fi
	done
	((missing == 0)) || return 1
	printf '%s\n' "${outputs[@]}"
}

if [[ $mode == print ]]; then
	print_outputs || exit 1
	exit 0
fi

goversion=$("$GO" env GOVERSION)
if [[ ! $goversion =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
	die "$goversion is too old: the pinned Kubernetes release needs Go >= 1.26"
fi

# Builds must never download a toolchain or rewrite go.mod/go.sum: the committed files are the pin.
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
jobs=${ZOVN_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

# One build at a time per cache: two `make test` runs would otherwise compile Kubernetes twice
# side by side on two cores and both take twice as long.
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
	log "another build holds $cache_root/.lock; waiting"
	flock 9
fi

tmp=""
build_pid=""
cleanup() {
	if [[ -n $build_pid ]]; then
		kill "$build_pid" 2>/dev/null || true
		wait "$build_pid" 2>/dev/null || true
	fi
	if [[ -n $tmp ]]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# build LABEL DEST MODULE_DIR LDFLAGS OUTPUT_NAME PACKAGE...
# OUTPUT_NAME names the binary of a single package; empty keeps go's names for several packages.
# Compiles into a scratch directory inside the cache and renames each binary into DEST, so an
# interrupted build never leaves a truncated binary under its final name.
build() {
	local label=$1 dest=$2 moddir=$3 ldflags=$4 out=$5
	shift 5
	tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
	local blog=$tmp/build.log start=$SECONDS next=$progress_every rc=0 f
	mkdir -p "$tmp/bin"
	log "building $label into $dest: $* (go build -p $jobs, log $blog)"
	(cd "$moddir" && exec "$GO" build -v -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp/bin/$out" "$@") >"$blog" 2>&1 &
	build_pid=$!
	while kill -0 "$build_pid" 2>/dev/null; do
		sleep 1
		if ((SECONDS - start >= next)); then
			# `go build -v` names each package as it is compiled, which is the only progress it gives.
			log "building $label: $((SECONDS - start))s elapsed, $(grep -c . "$blog" || true) packages done"
			next=$((next + progress_every))
		fi
	done
	wait "$build_pid" || rc=$?
	build_pid=""
	if ((rc != 0)); then
		tail -n 40 "$blog" >&2
		die "building $label failed (exit $rc) after $((SECONDS - start))s"
	fi
	mkdir -p "$dest"
	for f in "$tmp"/bin/*; do
		mv -f "$f" "$dest/"
	done
	rm -rf "$tmp"
	tmp=""
	log "built $label in $((SECONDS - start))s"
}

# The same stamping as Kubernetes' own hack/lib/version.sh, so `--version`, /version and kubectl's
# skew check report the real release instead of v0.0.0-master.
[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected Kubernetes version $k8s_version"
k8s_ldflags() {
	[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\. ]]
	local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} build_date pkg ldflags="-s -w"
	build_date=$(cd "$fixtures/k8s" && "$GO" list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major"
		ldflags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=archive -X $pkg.gitCommit="
		ldflags+=" -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"
	done
	echo "$ldflags"
}

if ! all_present "$fixtures_dir" cni-driver podserver cnitool; then
	build fixtures "$fixtures_dir" "$fixtures/cmd" "-s -w" "" \
		./cni-driver ./podserver github.com/containernetworking/cni/cnitool
fi

if ! all_present "$forwarder_dir" zstack-ovn-cni; then
	build "CNI forwarder" "$forwarder_dir" "$forwarder_src" "-s -w" zstack-ovn-cni .
fi

if ! all_present "$etcd_dir" etcd; then
	# The server module's main package would be named "server" after its module path.
	build "etcd $etcd_version" "$etcd_dir" "$fixtures/etcd" \
		"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$etcd_version" etcd \
		go.etcd.io/etcd/server/v3
fi

if ! all_present "$k8s_dir" kube-apiserver kube-controller-manager kube-scheduler kubectl; then
	build "kubernetes $k8s_version" "$k8s_dir" "$fixtures/k8s" "$(k8s_ldflags)" "" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
fi

if ! all_present "$k8s_dir" kubelet; then
	# The real-node sandbox (`zovn sandbox up --kubelet`) runs it. A step of its own, so a cache that
	# already holds the control plane only compiles what the kubelet adds (about 3.5 min on 2 cores).
	build "kubelet $k8s_version" "$k8s_dir" "$fixtures/k8s" "$(k8s_ldflags)" kubelet \
		k8s.io/kubernetes/cmd/kubelet
fi

if ! all_present "$helm_dir" helm; then
	# helm's own Makefile stamps the version the same way; without it `helm version` says v3.22.
	build "helm $helm_version" "$helm_dir" "$fixtures/helm" \
		"-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version" helm helm.sh/helm/v3/cmd/helm
fi

if ! all_present "$kubeconform_dir" kubeconform; then
	build "kubeconform $kubeconform_version" "$kubeconform_dir" "$fixtures/kubeconform" \
		"-s -w -X main.version=$kubeconform_version" kubeconform github.com/yannh/kubeconform/cmd/kubeconform
fi

print_outputs
