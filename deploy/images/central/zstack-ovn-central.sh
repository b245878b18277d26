#!/bin/bash
# zstack-ovn-central: the entrypoint of the zstack-ovn-central image (docs/images.md).
#
#   zstack-ovn-central nb|sb [--dry-run]   the NB or SB ovsdb-server of one StatefulSet pod
#   zstack-ovn-central northd [--dry-run]  ovn-northd (active/standby through the SB lock when several run)
#
# nb/sb: with ZOVN_REPLICAS=1 a standalone database; with 3 or 5 a Raft member: pod ordinal 0 creates the
# cluster, the others join it through <statefulset>-0.<service>. An existing database is reused as it is.
# --dry-run prints the commands, one per line, instead of running them.
#
# Environment (every value is checked before it reaches a command line; a bad one exits 2 naming it):
#   POD_NAME          nb/sb: the pod's name, <statefulset>-<ordinal> (from metadata.name)
#   POD_NAMESPACE     optional: peers are then named <pod>.<service>.<namespace>.svc
#   ZOVN_SERVICE      nb/sb with replicas > 1: the headless Service that gives each pod its DNS name
#   ZOVN_REPLICAS     nb/sb: 1, 3 or 5 (default 1)
#   ZOVN_DB_PORT      nb/sb: the client port (default 6641 nb, 6642 sb)
#   ZOVN_RAFT_PORT    nb/sb: the Raft port (default 6643 nb, 6644 sb)
#   ZOVN_DB_DIR       nb/sb: where the database file lives (default /var/lib/ovn)
#   ZOVN_NB_ADDRESS   northd: NB remotes, comma separated tcp:HOST:PORT, or ssl:HOST:PORT with TLS
#                     (default tcp:127.0.0.1:6641, or ssl:127.0.0.1:6641 with TLS)
#   ZOVN_SB_ADDRESS   northd: SB remotes, likewise (default tcp:127.0.0.1:6642, or ssl:127.0.0.1:6642)
#   ZOVN_SSL_KEY      TLS: the private key (PEM) of ZOVN_SSL_CERT
#   ZOVN_SSL_CERT     TLS: the certificate (PEM) this process shows its peers, as server and as client
#   ZOVN_SSL_CA       TLS: the CA certificate (PEM) a peer's certificate must chain to
#
# TLS: set all three ZOVN_SSL_* (for example the chart's Secret mounted at /etc/zstack-ovn/ssl), or none. With
# them, NB and SB serve only pssl: on their client ports, Raft members talk ssl: to each other, and northd
# connects over ssl:; a client must show a certificate signed by the same CA. Without them, plain TCP.
set -euo pipefail

die_usage() {
	echo "zstack-ovn-central: $*" >&2
	exit 2
}

role=${1:-}
dry_run=0
case ${2:-} in
"") ;;
--dry-run) dry_run=1 ;;
*) die_usage "unknown argument '$2' (want --dry-run)" ;;
esac
(($# <= 2)) || die_usage "too many arguments"

# run CMD...: runs a step, or prints it under --dry-run. launch CMD...: the same for the last, long-lived step.
run() {
	if ((dry_run)); then echo "$*"; else "$@"; fi
}
launch() {
	if ((dry_run)); then
		echo "exec $*"
		exit 0
	fi
	exec "$@"
}

# A DNS label as Kubernetes names Services and namespaces (RFC 1123): lower case, digits, '-', at most 63.
is_dns_label() { [[ ${#1} -le 63 && $1 =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; }
is_port() { [[ $1 =~ ^[1-9][0-9]{0,4}$ ]] && (($1 <= 65535)); }
is_ipv4() {
	local IFS=. o
	[[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
	for o in $1; do ((10#$o <= 255)) || return 1; done
}
# A host in an OVSDB remote: an IPv4 address, [IPv6], or a DNS name of labels (at most 253 characters)
# whose last label is not all digits (so 300.1.1.1 is a bad address, not a name).
is_host() {
	local h=$1 label
	if [[ $h =~ ^\[[0-9a-fA-F:.]+\]$ ]]; then return 0; fi
	if is_ipv4 "$h"; then return 0; fi
	[[ ${#h} -le 253 && -n $h && ! ${h##*.} =~ ^[0-9]+$ ]] || return 1
	local IFS=.
	for label in $h; do is_dns_label "$label" || return 1; done
	[[ $h != *. && $h != .* && $h != *..* ]]
}
# Comma-separated $scheme:HOST:PORT remotes (scheme: tcp, or ssl with TLS).
is_remotes() {
	local r rest
	[[ -n $1 && $1 != *, && $1 != ,* && $1 != *,,* ]] || return 1
	local IFS=,
	for r in $1; do
		[[ $r == "$scheme":* ]] || return 1
		rest=${r#"$scheme":}
		is_port "${rest##*:}" || return 1
		is_host "${rest%:*}" || return 1
	done
}
is_dir() { [[ $1 =~ ^/[A-Za-z0-9_./-]*$ && $1 != *//* && $1 != */./* && $1 != */../* && $1 != */.. && $1 != */. ]]; }

need() { # need NAME VALUE CHECK: the value or exit 2 naming the variable
	"$3" "$2" || die_usage "$1='$2' is not valid (${4:-see zstack-ovn-central --help})"
}

# TLS: all three files or none. Each is an absolute path to a readable file; a missing one is named.
scheme=tcp listen=ptcp ssl=()
ssl_set=() ssl_unset=()
for v in ZOVN_SSL_KEY ZOVN_SSL_CERT ZOVN_SSL_CA; do
	if [[ -n ${!v:-} ]]; then ssl_set+=("$v"); else ssl_unset+=("$v"); fi
done
if ((${#ssl_set[@]} > 0)); then
	((${#ssl_unset[@]} == 0)) ||
		die_usage "TLS needs ZOVN_SSL_KEY, ZOVN_SSL_CERT and ZOVN_SSL_CA; ${ssl_set[*]} set but ${ssl_unset[*]} missing"
	for v in "${ssl_set[@]}"; do
		need "$v" "${!v}" is_dir "want an absolute path of letters, digits and _ . / -"
		[[ -f ${!v} && -r ${!v} ]] || die_usage "$v: no readable file ${!v}"
	done
	scheme=ssl listen=pssl
	ssl=(--private-key="$ZOVN_SSL_KEY" --certificate="$ZOVN_SSL_CERT" --ca-cert="$ZOVN_SSL_CA")
fi

if [[ $role == northd ]]; then
	nb=${ZOVN_NB_ADDRESS:-$scheme:127.0.0.1:6641}
	sb=${ZOVN_SB_ADDRESS:-$scheme:127.0.0.1:6642}
	want="want $scheme:HOST:PORT[,$scheme:HOST:PORT...]"
	if [[ $scheme == ssl ]]; then
		want+=" (TLS is on: ZOVN_SSL_* are set)"
	else
		want+=" (ssl: needs ZOVN_SSL_KEY, ZOVN_SSL_CERT and ZOVN_SSL_CA)"
	fi
	need ZOVN_NB_ADDRESS "$nb" is_remotes "$want"
	need ZOVN_SB_ADDRESS "$sb" is_remotes "$want"
	run mkdir -p /var/run/ovn
	launch ovn-northd --no-chdir --ovnnb-db="$nb" --ovnsb-db="$sb" "${ssl[@]}" \
		--pidfile=/var/run/ovn/ovn-northd.pid --unixctl=/var/run/ovn/ovn-northd.ctl \
		-vconsole:info -vsyslog:off -vfile:off
fi

case $role in
nb) db_name=OVN_Northbound file=ovnnb_db schema=/usr/share/ovn/ovn-nb.ovsschema db_port=6641 raft_port=6643 ;;
sb) db_name=OVN_Southbound file=ovnsb_db schema=/usr/share/ovn/ovn-sb.ovsschema db_port=6642 raft_port=6644 ;;
*) die_usage "want a role: nb, sb or northd (got '$role')" ;;
esac

replicas=${ZOVN_REPLICAS:-1}
[[ $replicas == 1 || $replicas == 3 || $replicas == 5 ]] ||
	die_usage "ZOVN_REPLICAS='$replicas' is not valid (want 1, or 3 or 5 Raft members)"
db_port=${ZOVN_DB_PORT:-$db_port}
raft_port=${ZOVN_RAFT_PORT:-$raft_port}
need ZOVN_DB_PORT "$db_port" is_port "want 1-65535"
need ZOVN_RAFT_PORT "$raft_port" is_port "want 1-65535"
[[ $db_port != "$raft_port" ]] || die_usage "ZOVN_DB_PORT and ZOVN_RAFT_PORT are both $db_port"
dir=${ZOVN_DB_DIR:-/var/lib/ovn}
need ZOVN_DB_DIR "$dir" is_dir "want an absolute path of letters, digits and _ . / -"
db=$dir/$file.db

common=(--no-chdir --pidfile="/var/run/ovn/$file.pid" --unixctl="/var/run/ovn/$file.ctl"
	--remote="punix:/var/run/ovn/$file.sock" --remote="$listen:$db_port" "${ssl[@]}"
	-vconsole:info -vsyslog:off -vfile:off)

if ((replicas == 1)); then
	run mkdir -p "$dir" /var/run/ovn
	if [[ ! -e $db ]]; then
		run ovsdb-tool create "$db" "$schema"
	elif [[ $(ovsdb-tool needs-conversion "$db" "$schema") == yes ]]; then
		# A standalone database is upgraded offline; a clustered one is converted online by the leader.
		run ovsdb-tool convert "$db" "$schema"
	fi
	launch ovsdb-server "${common[@]}" "$db"
fi

pod=${POD_NAME:-}
[[ ${#pod} -le 63 && $pod =~ ^([a-z0-9]([-a-z0-9]*[a-z0-9])?)-(0|[1-9][0-9]*)$ ]] ||
	die_usage "POD_NAME='$pod' is not valid (want <statefulset>-<ordinal>, as a StatefulSet names its pods)"
set_name=${BASH_REMATCH[1]} ordinal=${BASH_REMATCH[3]}
svc=${ZOVN_SERVICE:-}
need ZOVN_SERVICE "$svc" is_dns_label "want the headless Service's name"
suffix=.$svc
if [[ -n ${POD_NAMESPACE:-} ]]; then
	need POD_NAMESPACE "$POD_NAMESPACE" is_dns_label "want a namespace name"
	suffix+=.$POD_NAMESPACE.svc
fi
self=$scheme:$pod$suffix:$raft_port

run mkdir -p "$dir" /var/run/ovn
if [[ ! -e $db ]]; then
	if ((ordinal == 0)); then
		run ovsdb-tool create-cluster "$db" "$schema" "$self"
	else
		run ovsdb-tool join-cluster "$db" "$db_name" "$self" "$scheme:$set_name-0$suffix:$raft_port"
	fi
elif ovsdb-tool db-is-clustered "$db" 2>/dev/null; then
	# A member's Raft address is in its database: turning TLS on or off does not change it, so say so
	# rather than serve Raft on the old scheme.
	had=$(ovsdb-tool db-local-address "$db")
	[[ $had == "$scheme":* ]] || die_usage "$db is a Raft member at $had, but this start wants $scheme: \
(ZOVN_SSL_* set: ssl, unset: tcp); start from empty volumes to change TLS on a Raft cluster (docs/deployment.md)"
fi
launch ovsdb-server "${common[@]}" "$db"
