#!/usr/bin/env bash
# Builds the images every real sandbox node needs, without Docker or a registry, as OCI archives
# cached under $ZOVN_CACHE/images/<image>-<content key>/<image>.oci.tar:
#   pause    the pod sandbox image: `gcc -Os -static` of build/pause/linux/pause.c from the pinned
#            k8s.io/kubernetes module, named as the kubelet's and kubeadm's default for that release
#   busybox  Debian's busybox-static with a link per applet in /bin
#   coredns  the cluster DNS server, the static binary hack/ensure-coredns.sh builds (the first time about
#            5 minutes), alone in the image, named as kubeadm names CoreDNS's image
#
#   hack/build-node-images.sh          build what is missing, print IMAGE_PAUSE=..., IMAGE_BUSYBOX=..., IMAGE_COREDNS=...
#   hack/build-node-images.sh --print  print the lines only; exit 1 if an image is not built yet
#
# Each archive is an OCI layout whose one tag is the image's tag only; its repository name is printed
# beside it (IMAGE_PAUSE_NAME=registry.k8s.io/pause, IMAGE_PAUSE_TAG=3.10.2), because containerd's
# `ctr images import --base-name REPO` turns a bare tag into REPO:TAG and so no `import-*` name appears.
# Environment: ZOVN_CACHE (cache root, default /var/cache/zstack-ovn), GO (the go command).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
log() { echo "build-node-images: $*" >&2; }
die() {
	log "$*"
	exit 1
}

mode=build
case "${1:-}" in
"") ;;
--print) mode=print ;;
-h | --help)
	sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) die "unknown argument '$1' (want --print)" ;;
esac

cache_root=${ZOVN_CACHE:-/var/cache/zstack-ovn}
if [[ -z ${ZOVN_CACHE:-} ]] && ! mkdir -p "$cache_root" 2>/dev/null; then
	cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/zstack-ovn
fi
images_root=$cache_root/images

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$repo/fixtures/k8s/go.mod")
[[ -n $k8s_version ]] || die "cannot read the pinned k8s.io/kubernetes version from fixtures/k8s/go.mod"

# The pause tag each Kubernetes release expects (kubeadm's PauseVersion, the kubelet's default sandbox image).
# Read from the module source when it is there; a fresh machine downloads the module first (build mode).
module_dir() {
	(cd "$repo/fixtures/k8s" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null)
}
pause_tag() {
	local dir=$1
	awk -F'"' '/^[ \t]*PauseVersion[ \t]*=/ { print $2; exit }' "$dir/cmd/kubeadm/app/constants/constants.go"
}

# busybox: the version apt would install now. An empty candidate means no package lists yet.
busybox_deb_version() {
	apt-cache policy busybox-static 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }'
}

script_hash() { sha256sum "${BASH_SOURCE[0]}" | cut -c1-16; }

pause_key() { { echo "$k8s_version"; gcc --version | head -1; script_hash; } | sha256sum | cut -c1-16; }
busybox_key() { { echo "$1"; script_hash; } | sha256sum | cut -c1-16; }
coredns_key() { { sha256sum "$1" | cut -c1-64; script_hash; } | sha256sum | cut -c1-16; }

kdir=$(module_dir || true)
if [[ -z $kdir || ! -f $kdir/build/pause/linux/pause.c ]]; then
	[[ $mode == build ]] || die "the k8s.io/kubernetes $k8s_version module is not in the Go module cache"
	log "downloading the k8s.io/kubernetes $k8s_version module source"
	(cd "$repo/fixtures/k8s" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local "$GO" mod download k8s.io/kubernetes)
	kdir=$(module_dir)
fi
ptag=$(pause_tag "$kdir")
[[ $ptag =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || die "cannot read PauseVersion from the k8s.io/kubernetes source"

bver=$(busybox_deb_version)
if [[ -z $bver && $mode == build ]]; then
	log "apt-get update (no package lists for busybox-static)"
	apt-get update -qq
	bver=$(busybox_deb_version)
fi
[[ -n $bver ]] || die "apt knows no busybox-static package (run apt-get update)"
# 1:1.35.0-4+deb12u1+b1 -> 1.35.0, the upstream version the tag carries.
btag=${bver#*:}
btag=${btag%%-*}

# The binary first: its content is the image's key. --print mode fails here when it is not built.
coredns_args=()
[[ $mode == build ]] || coredns_args=(--print)
coredns_lines=$("$repo/hack/ensure-coredns.sh" "${coredns_args[@]}") ||
	die "the CoreDNS binary is not built (hack/ensure-coredns.sh)"
coredns_bin=$(sed -n 's/^COREDNS=//p' <<<"$coredns_lines")
coredns_tag=$(sed -n 's/^COREDNS_VERSION=//p' <<<"$coredns_lines")
[[ -x $coredns_bin && $coredns_tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "hack/ensure-coredns.sh printed no binary and version"

pause_archive=$images_root/pause-$(pause_key)/pause.oci.tar
busybox_archive=$images_root/busybox-$(busybox_key "$bver")/busybox.oci.tar
coredns_archive=$images_root/coredns-$(coredns_key "$coredns_bin")/coredns.oci.tar

print_lines() {
	echo "IMAGE_PAUSE=$pause_archive"
	echo "IMAGE_PAUSE_NAME=registry.k8s.io/pause"
	echo "IMAGE_PAUSE_TAG=$ptag"
	echo "IMAGE_BUSYBOX=$busybox_archive"
	echo "IMAGE_BUSYBOX_NAME=docker.io/library/busybox"
	echo "IMAGE_BUSYBOX_TAG=$btag"
	echo "IMAGE_COREDNS=$coredns_archive"
	echo "IMAGE_COREDNS_NAME=registry.k8s.io/coredns/coredns"
	echo "IMAGE_COREDNS_TAG=$coredns_tag"
}

if [[ $mode == print ]]; then
	rc=0
	for a in "$pause_archive" "$busybox_archive" "$coredns_archive"; do
		[[ -f $a ]] || {
			log "missing $a"
			rc=1
		}
	done
	print_lines
	exit $rc
fi

need=()
command -v umoci >/dev/null || need+=(umoci)
command -v gcc >/dev/null || need+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a || -n $(find /usr/lib -name libc.a -print -quit 2>/dev/null) ]] || need+=(libc6-dev)
if ((${#need[@]})); then
	log "apt-get install ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$images_root"
exec 9>"$images_root/.lock"
if ! flock -n 9; then
	log "another build holds $images_root/.lock; waiting"
	flock 9
fi

tmp=""
cleanup() { [[ -z $tmp ]] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# pack ARCHIVE TAG ROOTFS_FILLER CONFIG...: an OCI layout with one layer filled by the function
# ROOTFS_FILLER (given the rootfs path), configured by the umoci config arguments, tarred to ARCHIVE.
pack() {
	local archive=$1 itag=$2 filler=$3
	shift 3
	tmp=$(mktemp -d "$images_root/.build-XXXXXX")
	umoci init --layout "$tmp/layout"
	umoci new --image "$tmp/layout:$itag"
	umoci unpack --image "$tmp/layout:$itag" "$tmp/bundle" >/dev/null
	"$filler" "$tmp/bundle/rootfs"
	umoci repack --image "$tmp/layout:$itag" "$tmp/bundle"
	umoci config --image "$tmp/layout:$itag" --config.label "org.opencontainers.image.source=zstack-ovn-kubernetes/hack/build-node-images.sh" "$@"
	umoci gc --layout "$tmp/layout"
	mkdir -p "$tmp/out"
	tar -C "$tmp/layout" -cf "$tmp/out/$(basename "$archive")" .
	rm -rf "$(dirname "$archive")"
	mv "$tmp/out" "$(dirname "$archive")"
	rm -rf "$tmp"
	tmp=""
	log "built $archive ($(du -k "$archive" | cut -f1) KiB)"
	prune "$(basename "$archive" .oci.tar)"
}

# prune IMAGE: keeps the three newest builds, as hack/build-images.sh does.
prune() {
	local old
	while read -r old; do
		log "removing an older build: $old"
		rm -rf "$old"
	done < <(ls -dt "$images_root/$1"-*/ 2>/dev/null | tail -n +4)
}

fill_pause() {
	# The flags of the release's build/pause/Makefile; the version string names the module it came from.
	gcc -Os -Wall -Werror -static -DVERSION="v$ptag-k8s.io/kubernetes@$k8s_version" \
		-o "$1/pause" "$kdir/build/pause/linux/pause.c"
}

fill_busybox() {
	local root=$1 debdir applet
	debdir=$(mktemp -d "$images_root/.deb-XXXXXX")
	# As root: apt's _apt user may not write into the cache.
	(cd "$debdir" && apt-get download -qq -o APT::Sandbox::User=root "busybox-static=$bver")
	dpkg-deb -x "$debdir"/busybox-static_*.deb "$debdir/x"
	mkdir -p "$root/bin" "$root/tmp" "$root/etc"
	cp "$debdir/x/bin/busybox" "$root/bin/busybox"
	rm -rf "$debdir"
	chmod 1777 "$root/tmp"
	for applet in $("$root/bin/busybox" --list); do
		[[ $applet == busybox || -e $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

fill_coredns() {
	# The binary alone: the Corefile comes from a ConfigMap volume (src/sandbox/cluster-dns.ts).
	install -m 0755 "$coredns_bin" "$1/coredns"
	mkdir -p "$1/tmp" "$1/etc"
	chmod 1777 "$1/tmp"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' >"$1/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}

if [[ -f $pause_archive ]]; then
	log "pause: cached ($pause_archive)"
else
	# Runs as 65535 like the upstream image: the sandbox process needs no privilege.
	pack "$pause_archive" "$ptag" fill_pause --config.entrypoint /pause --config.user 65535:65535
fi

if [[ -f $busybox_archive ]]; then
	log "busybox: cached ($busybox_archive)"
else
	pack "$busybox_archive" "$btag" fill_busybox --config.cmd sh \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
fi

if [[ -f $coredns_archive ]]; then
	log "coredns: cached ($coredns_archive)"
else
	pack "$coredns_archive" "$coredns_tag" fill_coredns --config.entrypoint /coredns \
		--config.exposedports 53/udp --config.exposedports 53/tcp
fi

print_lines
