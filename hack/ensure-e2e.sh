#!/usr/bin/env bash
# Builds what `make conformance` needs from the pinned Kubernetes release (fixtures/e2e/go.mod), cached
# outside the repository and keyed by version (docs/conformance.md):
#   - e2e.test (`go test -c k8s.io/kubernetes/test/e2e`), agnhost and regression-issue-74839 (test/images/),
#     static;
#   - the e2e test images the selected suites run, as OCI archives tagged with the exact names the
#     release's test/utils/image/manifest.go asks for: $ZOVN_CACHE/images/e2e-<name>-<version>.tar,
#     and a list of them, one "<image name> <archive>" a line, for the sandbox to import into containerd.
#
#   hack/ensure-e2e.sh          build what is missing, then print KEY=/abs/path lines
#   hack/ensure-e2e.sh --print  print the lines only; exit 1 if anything is not built yet
#
# stdout carries only the KEY=path lines; progress goes to stderr. Environment: ZOVN_CACHE (default
# /var/cache/zstack-ovn), ZOVN_BUILD_JOBS (go build -p), GO, ZOVN_DEBIAN_MIRROR, ZOVN_DEBIAN_SECURITY.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
moddir=$repo/fixtures/e2e
GO=${GO:-go}

# shellcheck source=hack/lib.sh
source "$repo/hack/lib.sh"
hack_cli ensure-e2e 2,13p "$@"

command -v "$GO" >/dev/null || die "no '$GO' on PATH; Go >= 1.26 is needed"
k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit } $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$moddir/go.mod")
[[ $k8s_version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "cannot read the pinned k8s.io/kubernetes version from $moddir/go.mod"
k8s_major=${BASH_REMATCH[1]} k8s_minor=${BASH_REMATCH[2]}

hack_cache_root
mkdir -p "$cache_root/images" 2>/dev/null || [[ $mode == print ]] || die "cannot create cache directory $cache_root"
bin_dir=$cache_root/e2e-$k8s_version
images_root=$cache_root/images
image_list=$images_root/e2e-images-$k8s_version.list
mirror=${ZOVN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${ZOVN_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

# The module's source, read for the image names and agnhost's files; `go mod download` fills it.
k8s_src() {
	local dir
	dir=$(cd "$moddir" && GOFLAGS=-mod=readonly "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null) || true
	if [[ -z $dir || ! -d $dir ]]; then
		[[ $mode == build ]] || return 1
		(cd "$moddir" && GOFLAGS=-mod=readonly "$GO" mod download k8s.io/kubernetes) >&2
		dir=$(cd "$moddir" && GOFLAGS=-mod=readonly "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)
	fi
	echo "$dir"
}

# image_ref SRC CONST: the name test/utils/image/manifest.go gives configs[CONST], e.g.
# registry.k8s.io/e2e-test-images/agnhost:2.66.1; the registry comes from the same file's defaults.
image_ref() {
	local file=$1/test/utils/image/manifest.go const=$2 reg name version host
	read -r reg name version < <(
		sed -n "s/^[[:space:]]*configs\[$const\] = Config{list\.\([A-Za-z0-9]*\), \"\([^\"]*\)\", \"\([^\"]*\)\"}.*/\1 \2 \3/p" "$file"
	) || true
	[[ -n ${version:-} ]] || die "no configs[$const] line in $file"
	host=$(sed -n "s/^[[:space:]]*$reg:[[:space:]]*\"\([^\"]*\)\",.*/\1/p" "$file" | head -1)
	[[ -n $host ]] || die "no default for registry $reg in $file"
	echo "$host/$name:$version"
}

# The images the selected suites run (test/conformance/selection.json names the suites; docs/upstream-e2e.md
# lists the images no selected test needs or that cannot be built here), each as NAME:CONSTANT, CONSTANT
# being its configs[] key in test/utils/image/manifest.go.
e2e_images=(agnhost:Agnhost busybox:BusyBox nginx:Nginx regression-issue-74839:RegressionIssue74839)

# Any change to how an image is made yields a new archive: each archive's .key file holds this hash.
image_key() {
	{
		echo "$mirror $security $k8s_version"
		sed -n "/^# image-$1-begin/,/^# image-$1-end/p" "${BASH_SOURCE[0]}"
		sed -n '/^# image-common-begin/,/^# image-common-end/p' "${BASH_SOURCE[0]}"
		[[ ! -f $bin_dir/$1 ]] || sha256sum "$bin_dir/$1" | cut -c1-64
	} | sha256sum | cut -c1-16
}

archive_of() { # NAME REF
	echo "$images_root/e2e-$1-${2##*:}.tar"
}

print_outputs() {
	local missing=0 f
	for f in "$bin_dir/e2e.test" "$bin_dir/ginkgo" "$bin_dir/agnhost" "$bin_dir/regression-issue-74839" "$image_list"; do
		[[ -e $f ]] || {
			log "missing $f"
			missing=1
		}
	done
	if [[ -f $image_list ]]; then
		while read -r _ f; do
			[[ -f $f ]] || {
				log "missing $f"
				missing=1
			}
		done <"$image_list"
	fi
	((missing == 0)) || return 1
	echo "E2E_TEST=$bin_dir/e2e.test"
	echo "GINKGO=$bin_dir/ginkgo"
	echo "AGNHOST=$bin_dir/agnhost"
	echo "E2E_IMAGES=$image_list"
}

if [[ $mode == print ]]; then
	print_outputs || exit 1
	exit 0
fi

goversion=$("$GO" env GOVERSION)
if [[ ! $goversion =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 26)); then
	die "$goversion is too old: the pinned Kubernetes release needs Go >= 1.26"
fi
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -buildvcs=false"
jobs=${ZOVN_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

exec 9>"$cache_root/.e2e-lock"
if ! flock -n 9; then
	log "another build holds $cache_root/.e2e-lock; waiting"
	flock 9
fi

tmp=""
cleanup() { [[ -z $tmp ]] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

src=$(k8s_src) || die "cannot find the k8s.io/kubernetes $k8s_version module source"

# The same version stamping as hack/ensure-binaries.sh, so the e2e framework logs the real release.
build_date=$(cd "$moddir" && "$GO" list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$k8s_major -X $pkg.gitMinor=$k8s_minor"
	ldflags+=" -X $pkg.gitTreeState=archive -X $pkg.gitCommit= -X $pkg.buildDate=${build_date:-1970-01-01T00:00:00Z}"
done

# go_build LABEL OUTPUT GO-SUBCOMMAND... PACKAGE: runs a go build into a scratch file (at nice 10: e2e.test alone compiles
# for many minutes on a shared machine) and renames it into place only when it succeeded.
go_build() {
	local label=$1 out=$2 start=$SECONDS rc=0 pkg=${*: -1}
	shift 2
	set -- "${@:1:$#-1}"
	tmp=$(mktemp -d "$cache_root/.build-e2e-XXXXXX")
	log "building $label (go -p $jobs, nice 10, log $tmp/build.log)"
	(cd "$moddir" && nice -n 10 "$GO" "$@" -p "$jobs" -trimpath -ldflags "$ldflags" -o "$tmp/out" "$pkg") >"$tmp/build.log" 2>&1 || rc=$?
	if ((rc != 0)); then
		tail -n 40 "$tmp/build.log" >&2
		die "building $label failed (exit $rc) after $((SECONDS - start))s"
	fi
	mkdir -p "$bin_dir"
	mv -f "$tmp/out" "$out"
	rm -rf "$tmp"
	tmp=""
	log "built $label in $((SECONDS - start))s"
}


# The images need umoci and mmdebstrap as hack/build-images.sh does; apt-get download fetches busybox-static.
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v umoci >/dev/null || need+=(umoci)
if ((${#need[@]})); then
	log "apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

progress() { "$@" 2>&1 | sed -u 's/^/ensure-e2e:   /' >&2; }
mib() { du -sm "$1" | cut -f1; }

# image-common-begin
# new_layout DIR: an empty OCI layout with an unpacked bundle DIR.bundle whose rootfs is to be filled.
new_layout() {
	umoci init --layout "$1"
	umoci new --image "$1:build"
	umoci unpack --image "$1:build" "$1.bundle" >/dev/null
}

# finish_layout DIR REF ARCHIVE [umoci config options...]: packs the rootfs, tags the image with REF's
# tag, names it REF for `ctr images import` (the io.containerd.image.name annotation, so no import-*
# names are left behind) and writes the layout as a tar archive.
finish_layout() {
	local dir=$1 ref=$2 archive=$3
	shift 3
	umoci repack --image "$dir:build" "$dir.bundle"
	umoci config --image "$dir:build" --tag "${ref##*:}" \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--config.label "org.opencontainers.image.source=k8s.io/kubernetes@$k8s_version (rebuilt by zstack-ovn-kubernetes hack/ensure-e2e.sh)" \
		"$@"
	umoci rm --image "$dir:build"
	umoci gc --layout "$dir"
	node -e '
		const fs = require("node:fs");
		const [file, ref] = process.argv.slice(1);
		const index = JSON.parse(fs.readFileSync(file, "utf8"));
		if (index.manifests.length !== 1) throw new Error(`${file}: ${index.manifests.length} manifests, want 1`);
		index.manifests[0].annotations = { ...index.manifests[0].annotations, "io.containerd.image.name": ref };
		fs.writeFileSync(file, JSON.stringify(index));
	' "$dir/index.json" "$ref"
	tar -C "$dir" -cf "$archive" .
	rm -rf "$dir.bundle"
}

# debian_rootfs ROOTFS PACKAGES HOOK: a Debian bookworm minbase root filesystem with PACKAGES (comma
# separated), no Recommends, docs and apt lists; HOOK runs with the root filesystem as $1.
debian_rootfs() {
	rmdir "$1"
	progress mmdebstrap --variant=minbase --mode=root --format=directory --include="$2" \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='rm -rf "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/var/log/apt/*' \
		--customize-hook="$3" \
		bookworm "$1" \
		"deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main"
}
# image-common-end

# image-agnhost-begin
# agnhost: upstream is Alpine with these tools; here Debian bookworm with their Debian counterparts
# (bind9-dnsutils for bind-tools, netcat-openbsd, iproute2, iperf, socat, curl, wget, bash), the agnhost binary
# of this release, the porter test certificate, /uploads for netexec, the agnhost-2 link the
# entrypoint tests use and the user and group the SupplementalGroups test expects. Not included: the
# CoreDNS binary and the fake registry's content, which upstream downloads from the internet.
build_agnhost() {
	local dir=$1 ref=$2 archive=$3 root=$1.bundle/rootfs
	new_layout "$dir"
	debian_rootfs "$root" bash,curl,wget,netcat-openbsd,iproute2,iperf,socat,bind9-dnsutils,procps \
		'printf "%s\n" "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" >>"$1/etc/passwd";
		 printf "%s\n" "user-defined-in-image:x:1000:" "group-defined-in-image:x:50000:user-defined-in-image" >>"$1/etc/group"'
	install -m 0755 "$bin_dir/agnhost" "$root/agnhost"
	ln -s agnhost "$root/agnhost-2"
	install -m 0644 "$src/test/images/agnhost/porter/localhost.crt" "$src/test/images/agnhost/porter/localhost.key" "$root/"
	mkdir -p "$root/uploads"
	finish_layout "$dir" "$ref" "$archive" --config.entrypoint /agnhost --config.cmd pause
}
# image-agnhost-end

# image-busybox-begin
# busybox: upstream is Docker Hub's busybox 1.37.0; here Debian's busybox-static (bookworm: 1.35) with a
# link for each applet, and /tmp and /etc/passwd as the upstream image has them.
build_busybox() {
	local dir=$1 ref=$2 archive=$3 root=$1.bundle/rootfs dl=$1.deb
	new_layout "$dir"
	mkdir -p "$dl"
	# A private apt state, so neither the host's package lists nor its sources are read or changed.
	mkdir -p "$dl/lists/partial" "$dl/cache/partial"
	printf '%s\n' "deb $mirror bookworm main" "deb $security bookworm-security main" >"$dl/sources.list"
	local apt=(-o "Dir::Etc::SourceList=$dl/sources.list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$dl/lists"
		-o "Dir::Cache=$dl/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
	progress apt-get "${apt[@]}" update
	(cd "$dl" && progress apt-get "${apt[@]}" download busybox-static)
	dpkg-deb -x "$dl"/busybox-static_*.deb "$dl/x"
	mkdir -p "$root/bin" "$root/tmp" "$root/etc"
	chmod 1777 "$root/tmp"
	install -m 0755 "$dl/x/bin/busybox" "$root/bin/busybox"
	local applet
	for applet in $("$root/bin/busybox" --list); do
		[[ $applet == busybox || -e $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
	done
	printf '%s\n' root:x:0:0:root:/root:/bin/sh nobody:x:65534:65534:nobody:/home:/bin/false >"$root/etc/passwd"
	printf '%s\n' root:x:0: nogroup:x:65534: >"$root/etc/group"
	rm -rf "$dl"
	finish_layout "$dir" "$ref" "$archive" --config.cmd sh
}
# image-busybox-end

# image-nginx-begin
# nginx: upstream is nginx 1.27 on Debian; here Debian bookworm's nginx-light (1.22) serving its default
# page on port 80 in the foreground, logging to the container's stdout and stderr.
build_nginx() {
	local dir=$1 ref=$2 archive=$3 root=$1.bundle/rootfs
	new_layout "$dir"
	debian_rootfs "$root" nginx-light \
		'ln -sf /dev/stdout "$1/var/log/nginx/access.log"; ln -sf /dev/stderr "$1/var/log/nginx/error.log"'
	finish_layout "$dir" "$ref" "$archive" --config.entrypoint nginx --config.cmd=-g '--config.cmd=daemon off;' \
		--config.exposedports 80/tcp
}
# image-nginx-end

# image-regression-issue-74839-begin
# regression-issue-74839: upstream puts the binary on Debian's base image; the server needs nothing else, so
# here it is the static binary alone.
build_regression-issue-74839() {
	local dir=$1 ref=$2 archive=$3 root=$1.bundle/rootfs
	new_layout "$dir"
	mkdir -p "$root/tmp"
	chmod 1777 "$root/tmp"
	install -m 0755 "$bin_dir/regression-issue-74839" "$root/regression-issue-74839"
	finish_layout "$dir" "$ref" "$archive" --config.entrypoint /regression-issue-74839
}
# image-regression-issue-74839-end

# ensure_image NAME: builds the image NAME (an e2e_images entry) unless its archive is cached with the
# current key.
ensure_image() {
	local name=$1 const ref archive key start
	const=$(printf '%s\n' "${e2e_images[@]}" | sed -n "s/^$name://p")
	ref=$(image_ref "$src" "$const")
	archive=$(archive_of "$name" "$ref")
	key=$(image_key "$name")
	if [[ -f $archive && $(cat "$archive.key" 2>/dev/null) == "$key" ]]; then
		log "$ref: cached ($archive)"
		return
	fi
	start=$SECONDS
	tmp=$(mktemp -d "$images_root/.build-e2e-XXXXXX")
	log "$ref: building"
	"build_$name" "$tmp/layout" "$ref" "$tmp/image.tar"
	mv -f "$tmp/image.tar" "$archive"
	echo "$key" >"$archive.key"
	rm -rf "$tmp"
	tmp=""
	log "$ref: built in $((SECONDS - start))s, $(mib "$archive") MiB ($archive)"
}

# Downloads and dpkg first, while nothing else needs the CPU; agnhost's image needs its binary.
ensure_image busybox
ensure_image nginx
# The ginkgo CLI runs e2e.test in parallel processes (hack/conformance.sh), at the version e2e.test links, from the
# module proxy (its own dependencies are not in fixtures/e2e's module graph).
ginkgo_version=$(awk '$1 == "github.com/onsi/ginkgo/v2" { print $2; exit }' "$moddir/go.mod")
[[ $ginkgo_version =~ ^v2\.[0-9]+\.[0-9]+$ ]] || die "cannot read the github.com/onsi/ginkgo/v2 version from $moddir/go.mod"
if [[ ! -x $bin_dir/ginkgo ]]; then
	tmp=$(mktemp -d "$cache_root/.build-e2e-XXXXXX")
	log "building the ginkgo CLI $ginkgo_version"
	(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" nice -n 10 "$GO" install "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo_version") >&2 ||
		die "building the ginkgo CLI $ginkgo_version failed"
	mkdir -p "$bin_dir"
	mv -f "$tmp/ginkgo" "$bin_dir/ginkgo"
	rm -rf "$tmp"
	tmp=""
fi
[[ -x $bin_dir/e2e.test ]] || go_build "e2e.test $k8s_version" "$bin_dir/e2e.test" test -c -vet=off k8s.io/kubernetes/test/e2e
for tool in agnhost regression-issue-74839; do
	[[ -x $bin_dir/$tool ]] || go_build "$tool ($k8s_version)" "$bin_dir/$tool" build "k8s.io/kubernetes/test/images/$tool"
done
ensure_image agnhost
ensure_image regression-issue-74839

list_tmp=$(mktemp "$images_root/.e2e-list-XXXXXX")
for entry in "${e2e_images[@]}"; do
	ref=$(image_ref "$src" "${entry#*:}")
	echo "$ref $(archive_of "${entry%%:*}" "$ref")" >>"$list_tmp"
done
mv -f "$list_tmp" "$image_list"

print_outputs
