#!/usr/bin/env bash
# Builds the container images without Docker: a Debian bookworm root filesystem made by mmdebstrap (base
# layer), our files on top (second layer), packed by umoci into an OCI archive. Each image is described by
# deploy/images/<image>/manifest (docs/images.md) and cached under
# $ZOVN_CACHE/images/<image>-<content key>/<image>.oci.tar, reused while its inputs are unchanged.
#
#   hack/build-images.sh [IMAGE...]          build what is missing (default: product central), print KEY=path
#   hack/build-images.sh --print [IMAGE...]  print the lines only; exit 1 if an image is not built yet
#
# stdout carries only IMAGE_<NAME>=path lines; progress and sizes go to stderr.
# Environment: ZOVN_CACHE (cache root, default /var/cache/zstack-ovn), ZOVN_DEBIAN_MIRROR (default
# http://deb.debian.org/debian), ZOVN_DEBIAN_SECURITY (default http://deb.debian.org/debian-security).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "build-images: $*" >&2; }
die() {
	log "$*"
	exit 1
}

mode=build
images=()
for arg in "$@"; do
	case $arg in
	--print) mode=print ;;
	-h | --help)
		sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	product | central) images+=("$arg") ;;
	*) die "unknown argument '$arg' (want --print, product or central)" ;;
	esac
done
((${#images[@]})) || images=(product central)

declare -A image_name=([product]=zstack-ovn-kubernetes [central]=zstack-ovn-central)
tag=$(node -p 'require(process.argv[1]).version' "$repo/package.json")

cache_root=${ZOVN_CACHE:-/var/cache/zstack-ovn}
if [[ -z ${ZOVN_CACHE:-} ]] && ! mkdir -p "$cache_root" 2>/dev/null; then
	cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/zstack-ovn
fi
images_root=$cache_root/images
mirror=${ZOVN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${ZOVN_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

# manifest_lines IMAGE KEYWORD: the fields after KEYWORD on each of the manifest's lines that start with it.
manifest_lines() {
	awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$repo/deploy/images/$1/manifest"
}

hash_files() { LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16; }

# The base layer depends only on the package list, the mirrors and how the root filesystem is made.
base_key() {
	{
		manifest_lines "$1" package | LC_ALL=C sort
		manifest_lines "$1" dpkg
		echo "$mirror $security"
		sed -n '/^# base-layer-begin/,/^# base-layer-end/p' "${BASH_SOURCE[0]}"
	} | sha256sum | cut -c1-16
}

# The image's key adds every file that ends up in it: the manifest, this script, for a sea: file the
# sources it is built from (non-test TypeScript, the lock file, the SEA tool and the node that runs it), and
# for a go: file its cmd/ directory and the Go version.
image_key() {
	local image=$1 src
	{
		base_key "$image"
		(cd "$repo" && printf '%s\0' "deploy/images/$image/manifest" hack/build-images.sh | hash_files)
		while read -r src _; do
			case $src in
			sea:*)
				node --version
				(cd "$repo" && find src -name '*.ts' ! -name '*.test.ts' -print0 |
					cat - <(printf '%s\0' package-lock.json tools/build-sea.ts) | hash_files)
				;;
			go:*)
				${GO:-go} env GOVERSION
				(cd "$repo" && find "cmd/${src#go:}" -type f ! -name '*_test.go' -print0 | hash_files)
				;;
			repo:*) (cd "$repo" && printf '%s\0' "${src#repo:}" | hash_files) ;;
			esac
		done < <(manifest_lines "$image" file)
		echo "$tag"
	} | sha256sum | cut -c1-16
}

# A manifest line the build would not understand must stop it, not be skipped.
check_manifest() {
	local bad
	bad=$(awk '$0 !~ /^[ \t]*(#|$)/ && $1 !~ /^(package|dpkg|file|link|entrypoint)$/' "$repo/deploy/images/$1/manifest")
	[[ -z $bad ]] || die "deploy/images/$1/manifest: unknown line: $bad"
}

archive_of() { echo "$images_root/$1-$(image_key "$1")/${image_name[$1]}.oci.tar"; }

if [[ $mode == print ]]; then
	rc=0
	for image in "${images[@]}"; do
		a=$(archive_of "$image")
		[[ -f $a ]] || {
			log "missing $a"
			rc=1
		}
		echo "IMAGE_${image^^}=$a"
	done
	exit $rc
fi

# Installs the image tools from the Debian registry the way hack/install-deps.sh installs the test's needs.
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v umoci >/dev/null || need+=(umoci)
if ((${#need[@]})); then
	log "apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$images_root"
exec 9>"$images_root/.lock"
if ! flock -n 9; then
	log "another build holds $images_root/.lock; waiting"
	flock 9
fi

tmp=""
base_pids=()
cleanup() {
	local pid
	for pid in "${base_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait
	[[ -z $tmp ]] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Prefixes a command's output lines so mmdebstrap's and umoci's progress reads as ours.
# Prefixes a command's output lines so mmdebstrap's and umoci's progress reads as ours; the base layers are
# built side by side, so each line also names its image.
progress_prefix=""
progress() { "$@" 2>&1 | sed -u "s/^/build-images:   $progress_prefix/" >&2; }

mib() { du -sm "$1" | cut -f1; }

# base-layer-begin
# build_base IMAGE DIR: an OCI layout in DIR whose tag "base" is the Debian root filesystem with the
# manifest's packages, installed with its dpkg options; no Recommends, no apt lists or caches.
build_base() {
	local image=$1 dir=$2 bundle=$2.bundle pkgs opt dpkgopts=()
	pkgs=$(manifest_lines "$image" package | paste -sd, -)
	while read -r opt; do dpkgopts+=("--dpkgopt=$opt"); done < <(manifest_lines "$image" dpkg)
	umoci init --layout "$dir"
	umoci new --image "$dir:base"
	umoci unpack --image "$dir:base" "$bundle" >/dev/null
	rmdir "$bundle/rootfs"
	# merged-usr: usr-is-merged instead of usrmerge, which would pull in perl (about 50 MiB).
	progress mmdebstrap --variant=apt --mode=root --format=directory --include="$pkgs" \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "${dpkgopts[@]}" \
		--customize-hook='rm -rf "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/* "$1"/var/log/*.log "$1"/var/log/apt/*' \
		bookworm "$bundle/rootfs" \
		"deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main"
	log "  ${progress_prefix}base root filesystem: $(mib "$bundle/rootfs") MiB; largest packages (KiB installed):"
	chroot "$bundle/rootfs" dpkg-query -W -f='${Installed-Size}\t${Package}\n' | sort -rn | head -6 |
		sed "s/^/build-images:     $progress_prefix/" >&2
	umoci repack --image "$dir:base" "$bundle"
	rm -rf "$bundle"
}
# base-layer-end

# add_files IMAGE ROOTFS: the manifest's file and link lines, copied into ROOTFS.
add_files() {
	local image=$1 root=$2 src path mode target
	while read -r src path mode; do
		mkdir -p "$root$(dirname "$path")"
		case $src in
		sea:*)
			node --import tsx "$repo/tools/build-sea.ts" --entry "$repo/src/cli/${src#sea:}.ts" --out "$root$path" 2>&1 |
				grep -v "^warning: Can't find string offset" | sed 's/^/build-images:   /' >&2
			;;
		go:*)
			# Static and standard library only, with the flags hack/ensure-binaries.sh uses for its CNI_FORWARDER.
			(cd "$repo/cmd/${src#go:}" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
				${GO:-go} build -trimpath -ldflags "-s -w" -o "$root$path" .)
			;;
		repo:*) cp "$repo/${src#repo:}" "$root$path" ;;
		*) die "manifest of $image: unknown source $src" ;;
		esac
		chmod "$mode" "$root$path"
	done < <(manifest_lines "$image" file)
	while read -r target path; do
		mkdir -p "$root$(dirname "$path")"
		ln -sfn "$target" "$root$path"
	done < <(manifest_lines "$image" link)
}

build_image() {
	local image=$1 name=${image_name[$1]} key archive bkey base lay bundle start=$SECONDS entry
	key=$(image_key "$image")
	archive=$images_root/$image-$key/$name.oci.tar
	if [[ -f $archive ]]; then
		log "$name: cached ($archive)"
		return
	fi
	tmp=$(mktemp -d "$images_root/.build-XXXXXX")
	bkey=$(base_key "$image")
	base=$images_root/base-$image-$bkey
	[[ -d $base ]] || die "$name: no base layer $base"
	lay=$tmp/layout
	bundle=$tmp/bundle
	cp -a "$base" "$lay"
	umoci unpack --image "$lay:base" "$bundle" >/dev/null
	log "$name: adding our files"
	add_files "$image" "$bundle/rootfs"
	umoci repack --image "$lay:base" "$bundle"
	entry=$(manifest_lines "$image" entrypoint)
	local cfg=(--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		--config.label "org.opencontainers.image.title=$name" --config.label "org.opencontainers.image.version=$tag"
		--image "$lay:base" --tag "$tag")
	[[ -z $entry ]] || cfg+=(--config.entrypoint "$entry")
	umoci config "${cfg[@]}"
	umoci rm --image "$lay:base"
	umoci gc --layout "$lay"
	mkdir -p "$tmp/out"
	tar -C "$lay" -cf "$tmp/out/$name.oci.tar" .
	log "$name:$tag built in $((SECONDS - start))s: archive $(mib "$tmp/out/$name.oci.tar") MiB (compressed layers), unpacked $(mib "$bundle/rootfs") MiB"
	log "  largest paths (MiB):"
	(cd "$bundle/rootfs" && du -xsm usr/local/bin usr/lib/x86_64-linux-gnu usr/lib/python3* usr/share/perl* usr/bin \
		usr/sbin usr/share 2>/dev/null || true) | sort -rn | head -6 | sed 's/^/build-images:     /' >&2
	rm -rf "$bundle"
	mv "$tmp/out" "$images_root/$image-$key"
	rm -rf "$tmp"
	tmp=""
	prune "$image"
}

# prune IMAGE: keeps the three newest builds of IMAGE and the two newest base layers (another checkout on
# another branch may share the cache), so edits to the sources do not fill the disk.
prune() {
	local old
	while read -r old; do
		log "removing an older build: $old"
		rm -rf "$old"
	done < <(
		ls -dt "$images_root/$1"-*/ 2>/dev/null | tail -n +4
		ls -dt "$images_root/base-$1"-*/ 2>/dev/null | tail -n +3
	)
}

# ensure_bases: builds the missing base layers of the images that need building, side by side (most of
# the time goes to downloads and dpkg, not to the CPU), each in its own scratch directory.
ensure_bases() {
	local image base btmp pid rc=0 started=()
	for image in "${images[@]}"; do
		[[ ! -f $(archive_of "$image") ]] || continue
		base=$images_root/base-$image-$(base_key "$image")
		if [[ -d $base ]]; then
			log "${image_name[$image]}: base layer cached ($base)"
			continue
		fi
		log "${image_name[$image]}: building the Debian base layer (packages: $(manifest_lines "$image" package | paste -sd' ' -))"
		btmp=$(mktemp -d "$images_root/.build-XXXXXX")
		(
			trap 'rm -rf "$btmp"' EXIT
			progress_prefix="[$image] "
			build_base "$image" "$btmp/base"
			mv "$btmp/base" "$base"
		) &
		base_pids+=($!)
		started+=("$image")
	done
	for pid in "${base_pids[@]}"; do
		wait "$pid" || rc=1
	done
	base_pids=()
	((rc == 0)) || die "building the base layer of ${started[*]} failed (see above)"
}

for image in "${images[@]}"; do
	check_manifest "$image"
done
ensure_bases
for image in "${images[@]}"; do
	build_image "$image"
done
for image in "${images[@]}"; do
	echo "IMAGE_${image^^}=$(archive_of "$image")"
done
