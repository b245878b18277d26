#!/usr/bin/env bash
# The upstream judge (docs/upstream-e2e.md): runs the Kubernetes network e2e suites selected by
# test/conformance/selection.json against the real-node sandbox and writes docs/conformance.md.
#
#   hack/conformance.sh            build (cache hits after the first time), bring up `zovn sandbox up --kubelet`,
#                                  run e2e.test, write the report, take the sandbox down
#   hack/conformance.sh --dry-run  no sandbox: e2e.test --ginkgo.dry-run with the same focus and skip; the
#                                  report says "selected, not yet run"
#
# Environment: CONFORMANCE_RESULTS (JUnit and logs, default /var/tmp/zstack-ovn-conformance; emptied first),
# ZOVN_SANDBOX_NAME (default zsbconf), CONFORMANCE_KEEP_SANDBOX=1 (leave it up afterwards), CONFORMANCE_PROCS
# (parallel e2e processes through the ginkgo CLI, default 3; 1 runs e2e.test alone),
# ZOVN (the zovn command, default bin/zovn of this checkout), CONFORMANCE_REPORT (default docs/conformance.md),
# CONFORMANCE_SELECTION (another selection file, e.g. to rerun a few tests; default test/conformance/selection.json),
# plus what hack/ensure-binaries.sh and hack/ensure-e2e.sh read.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" # node --import tsx resolves tsx from the working directory
log() { echo "conformance: $*" >&2; }
die() {
	log "$*"
	exit 1
}

dry_run=0
case "${1:-}" in
"") ;;
--dry-run) dry_run=1 ;;
-h | --help)
	sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) die "unknown argument '$1' (want --dry-run)" ;;
esac

results=${CONFORMANCE_RESULTS:-/var/tmp/zstack-ovn-conformance}
report=${CONFORMANCE_REPORT:-$repo/docs/conformance.md}
export ZOVN_SANDBOX_NAME=${ZOVN_SANDBOX_NAME:-zsbconf}
zovn=${ZOVN:-$repo/bin/zovn}
selection_file=${CONFORMANCE_SELECTION:-$repo/test/conformance/selection.json}
report_tool=(node --import tsx "$repo/tools/conformance-report.ts")

# The sandbox's control plane and e2e.test must be the same release: the suites assume their own API.
module_version() { awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' "$1"; }
cp_version=$(module_version "$repo/fixtures/k8s/go.mod")
e2e_version=$(module_version "$repo/fixtures/e2e/go.mod")
[[ -n $cp_version && $cp_version == "$e2e_version" ]] ||
	die "fixtures/k8s pins Kubernetes '$cp_version' but fixtures/e2e pins '$e2e_version': move both together"

# Before any build, so a missing real-node mode is said at once rather than after half an hour of compiling.
if ((!dry_run)) && ! "$zovn" sandbox --help 2>&1 | grep -q -- '--kubelet'; then
	die "'zovn sandbox up' has no --kubelet option on this checkout: the real-node sandbox (issue 13) is not here yet, and the upstream suites need real kubelets and a container runtime. 'make conformance-dry-run' lists what would run."
fi

# The dry run needs only e2e.test; the images are built too, so a dry run also proves they build.
((dry_run)) || eval "$("$repo/hack/ensure-binaries.sh")"
eval "$("$repo/hack/ensure-e2e.sh")"
mapfile -t selection < <("${report_tool[@]}" args --selection "$selection_file")
((${#selection[@]})) || die "the selection gave no e2e.test arguments"

rm -rf "$results"
mkdir -p "$results"
ginkgo=(--ginkgo.no-color --ginkgo.junit-report="$results/junit.xml" "${selection[@]}")

if ((dry_run)); then
	log "dry run: e2e.test --ginkgo.dry-run with the selection's focus and skip (no cluster needed)"
	"$E2E_TEST" --provider=local --ginkgo.dry-run --ginkgo.v "${ginkgo[@]}" >"$results/e2e.log" 2>&1 ||
		die "e2e.test --ginkgo.dry-run failed; see $results/e2e.log"
	"${report_tool[@]}" report --selection "$selection_file" --dry-run --junit "$results" --out "$report" \
		--command "make conformance-dry-run   # e2e.test --ginkgo.dry-run, focus and skip from ${selection_file#"$repo"/}"
	exit 0
fi

cleanup() {
	if [[ ${CONFORMANCE_KEEP_SANDBOX:-} == 1 ]]; then
		log "leaving sandbox $ZOVN_SANDBOX_NAME up (CONFORMANCE_KEEP_SANDBOX=1); 'bin/zovn sandbox down' removes it"
	else
		"$zovn" sandbox down >&2 || log "sandbox down failed; run 'ZOVN_SANDBOX_NAME=$ZOVN_SANDBOX_NAME bin/zovn sandbox down'"
	fi
}
trap cleanup EXIT

# The real-node sandbox may import each "<image name> <archive>" line of this list into every node's containerd;
# whatever it leaves out is imported below.
export ZOVN_SANDBOX_IMAGES=$E2E_IMAGES
# ovs-vswitchd under OVS's own monitor, as on a real host: OVS 3.1's userspace conntrack aborts under the
# suites' connection churn (docs/sandbox.md); unmonitored, the node would lose its network for the rest of the run.
export ZOVN_OVS_MONITOR=1
log "bringing up sandbox $ZOVN_SANDBOX_NAME with real kubelets (images: $E2E_IMAGES)"
"$zovn" sandbox up --kubelet >&2

base=${ZOVN_SANDBOX_BASE:-/var/lib/zstack-ovn-sandbox}
kubeconfig=$base/$ZOVN_SANDBOX_NAME/pki/admin.kubeconfig
[[ -f $kubeconfig ]] || die "no admin kubeconfig at $kubeconfig"

# Every node must hold every e2e image before the run: nothing may be pulled from a registry. An image the
# sandbox did not import is imported here with ctr in the node (containerd's default socket inside it); the
# CRI image store picks it up without a restart and the kubelet reports it in status.images.
ref_re='^[a-z0-9][a-z0-9./-]*:[A-Za-z0-9_][A-Za-z0-9_.-]*$'
while read -r ref archive; do
	[[ $ref =~ $ref_re && $archive == /*.tar && -f $archive ]] || die "bad line in $E2E_IMAGES: '$ref $archive'"
done <"$E2E_IMAGES"
node_images() {
	"$KUBECTL" --kubeconfig "$kubeconfig" get nodes \
		-o go-template='{{range .items}}{{$n := .metadata.name}}{{range .status.images}}{{range .names}}{{$n}} {{.}}{{"\n"}}{{end}}{{end}}{{end}}'
}
mapfile -t nodes < <("$KUBECTL" --kubeconfig "$kubeconfig" get nodes -o go-template='{{range .items}}{{.metadata.name}}{{"\n"}}{{end}}')
((${#nodes[@]})) || die "the sandbox has no nodes"
for node in "${nodes[@]}"; do
	[[ $node =~ ^[a-z0-9][a-z0-9.-]*$ ]] || die "unexpected node name '$node'"
done
# missing_images: "node ref archive" for each image a node does not report.
missing_images() {
	local have node ref archive
	have=$(node_images)
	for node in "${nodes[@]}"; do
		while read -r ref archive; do
			grep -qxF "$node $ref" <<<"$have" || echo "$node $ref $archive"
		done <"$E2E_IMAGES"
	done
}
while read -r node ref archive; do
	[[ -n $node ]] || continue
	log "node $node lacks $ref: importing $archive"
	"$zovn" sandbox exec "$node" -- ctr -n k8s.io images import "$archive" </dev/null >&2
done < <(missing_images)
deadline=$((SECONDS + 120))
while [[ -n $(missing_images) ]]; do
	if ((SECONDS > deadline)); then
		missing_images | sed 's/^/conformance: still missing: /' >&2
		die "the nodes do not report every e2e image of $E2E_IMAGES"
	fi
	sleep 5
done
log "every node holds the $(grep -c . "$E2E_IMAGES") e2e images"

procs=${CONFORMANCE_PROCS:-3}
[[ $procs =~ ^[1-9][0-9]?$ ]] || die "CONFORMANCE_PROCS='$procs': want a number of parallel e2e processes from 1 to 99"
log "running e2e.test in $procs process(es) ($(grep -c . <<<"$(printf '%s\n' "${selection[@]}")") focus/skip patterns); log $results/e2e.log"
start=$SECONDS
run_started=$(date -u +%Y-%m-%dT%H:%M:%S)
rc=0
# Ginkgo's default suite timeout is one hour; the selected suites take longer on a shared 2-core machine.
# --kubectl-path: the tests shell out to kubectl (exec into pods); the machine's own may be another release.
# --num-nodes: the suite counts the nodes only in its first process; the others would skip every spec that
# "Requires at least 2 nodes (not -1)".
e2e_args=(--kubeconfig="$kubeconfig" --kubectl-path="$KUBECTL" --provider=local --e2e-output-dir="$results"
	--num-nodes="${#nodes[@]}")
if ((procs > 1)); then
	# The ginkgo CLI runs the specs in $procs processes (those marked [Serial] alone, at the end) and merges
	# their JUnit reports into one; it takes the selection as its own flags (--focus, --skip).
	"$GINKGO" --procs="$procs" --timeout=24h -v --no-color --output-dir="$results" --junit-report=junit.xml \
		"${selection[@]/#--ginkgo./--}" "$E2E_TEST" -- "${e2e_args[@]}" >"$results/e2e.log" 2>&1 || rc=$?
else
	"$E2E_TEST" "${e2e_args[@]}" --ginkgo.timeout=24h --ginkgo.v "${ginkgo[@]}" >"$results/e2e.log" 2>&1 || rc=$?
fi
log "e2e.test exited $rc after $((SECONDS - start))s"
# The logs outlive a `down` without --purge: count only what the run's own time stamps.
aborts=$(cat "$base/$ZOVN_SANDBOX_NAME"/logs/node*/openvswitch/ovs-vswitchd.log 2>/dev/null |
	awk -v since="$run_started" 'index($0, "|util|EMER|") && substr($0, 1, 19) >= since' | wc -l)
log "ovs-vswitchd aborted ${aborts:-0} time(s) during the run, each restarted by its monitor (grep '|util|EMER|' in $base/$ZOVN_SANDBOX_NAME/logs/node*/openvswitch/ovs-vswitchd.log)"
[[ -f $results/junit.xml ]] || die "e2e.test wrote no JUnit report; see $results/e2e.log"
"${report_tool[@]}" report --selection "$selection_file" --junit "$results" --out "$report" \
	--command "make conformance   # zovn sandbox up --kubelet (the product installed by its chart), then e2e.test --provider=local in $procs ginkgo processes, focus and skip from ${selection_file#"$repo"/}"
