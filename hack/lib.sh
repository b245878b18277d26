# Shared by the hack/ scripts that build into the cache; sourced by them, never run on its own.

# hack_cli NAME HELP_LINES [ARG]: defines log and die (their lines start with NAME) and sets `mode`: build, or
# print with --print. --help prints the calling script's header (the sed line range HELP_LINES, e.g. 2,13p)
# and exits; any other argument exits 2 naming it.
hack_cli() {
	hack_name=$1
	local help=$2 script=${BASH_SOURCE[1]}
	shift 2
	mode=build
	case "${1:-}" in
	"") ;;
	--print) mode=print ;;
	-h | --help)
		sed -n "$help" "$script" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "$hack_name: unknown argument '$1' (want --print)" >&2
		exit 2
		;;
	esac
}

log() { echo "${hack_name:-hack}: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# hack_cache_root: sets `cache_root` to $ZOVN_CACHE, else /var/cache/zstack-ovn, else (when that cannot be
# made) the user's cache directory.
hack_cache_root() {
	cache_root=${ZOVN_CACHE:-/var/cache/zstack-ovn}
	if [[ -z ${ZOVN_CACHE:-} ]] && ! mkdir -p "$cache_root" 2>/dev/null; then
		cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/zstack-ovn
	fi
}
