#!/usr/bin/env bash
# Builds the cluster DNS server of the real-node sandbox: CoreDNS at the version fixtures/coredns/go.mod pins,
# from the Go module proxy, with only the plugins fixtures/coredns/main.go links (kubernetes, cache, errors,
# health, ready; nothing that forwards outside the machine), static, into
# $ZOVN_CACHE/coredns-<version>/coredns.
#
#   hack/ensure-coredns.sh          build it if missing, then print COREDNS=/abs/path and COREDNS_VERSION=vX.Y.Z
#   hack/ensure-coredns.sh --print  print the lines only; exit 1 if it is not built yet
#
# Only the real-node sandbox needs it (hack/build-node-images.sh calls this for the CoreDNS image), so neither
# `make binaries` nor the simulator sandbox pays for it. The directory's .key file holds a hash of the module's
# files: a change to the plugin set or go.sum rebuilds in place. Environment: ZOVN_CACHE (default
# /var/cache/zstack-ovn), ZOVN_BUILD_JOBS (go build -p), GO.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
moddir=$repo/fixtures/coredns
GO=${GO:-go}

# shellcheck source=hack/lib.sh
source "$repo/hack/lib.sh"
hack_cli ensure-coredns 2,13p "$@"

version=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" { print $3; exit } $1 == "github.com/coredns/coredns" && $2 ~ /^v/ { print $2; exit }' "$moddir/go.mod")
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read the pinned github.com/coredns/coredns version from $moddir/go.mod"

hack_cache_root
dir=$cache_root/coredns-$version
bin=$dir/coredns
key=$(cd "$moddir" && cat go.mod go.sum main.go | sha256sum | cut -c1-16)

built() { [[ -x $bin && $(cat "$dir/.key" 2>/dev/null) == "$key" ]]; }
print_lines() {
	echo "COREDNS=$bin"
	echo "COREDNS_VERSION=$version"
}

if [[ $mode == print ]]; then
	built || {
		log "missing $bin (or built from other sources)"
		exit 1
	}
	print_lines
	exit 0
fi

command -v "$GO" >/dev/null || die "no '$GO' on PATH; Go >= 1.26 is needed"
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
jobs=${ZOVN_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

mkdir -p "$cache_root"
exec 9>"$cache_root/.coredns-lock"
if ! flock -n 9; then
	log "another build holds $cache_root/.coredns-lock; waiting"
	flock 9
fi

if built; then
	log "CoreDNS $version: cached ($bin)"
else
	tmp=$(mktemp -d "$cache_root/.build-coredns-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	start=$SECONDS
	log "building CoreDNS $version (go -p $jobs, nice 10, log $tmp/build.log; about 5 minutes on 2 busy cores)"
	rc=0
	# CoreDNS's Makefile stamps the commit the same way; a module build has none, so it names the module version.
	(cd "$moddir" && nice -n 10 "$GO" build -p "$jobs" -trimpath \
		-ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=module-$version" \
		-o "$tmp/coredns" .) >"$tmp/build.log" 2>&1 || rc=$?
	if ((rc != 0)); then
		tail -n 40 "$tmp/build.log" >&2
		die "building CoreDNS $version failed (exit $rc) after $((SECONDS - start))s"
	fi
	mkdir -p "$dir"
	mv -f "$tmp/coredns" "$bin"
	echo "$key" >"$dir/.key"
	log "built CoreDNS $version in $((SECONDS - start))s ($bin)"
fi

print_lines
