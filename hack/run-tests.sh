#!/usr/bin/env bash
# Runs every test with Node's test runner: the spec reporter for people, and a TAP copy from which the plain
# closing line "N passed, N failed" is printed. The exit code is the runner's.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp
tap=.tmp/test-results.tap
# --test-force-exit: a test file's process exits (process.exit, after its 'exit' hooks, which kill any rig
# daemon left) as soon as its tests and after hooks are done, instead of waiting for its event loop to drain
# and then running Node's full environment teardown. One run of nb-fault-churn.test.ts passed every test and
# then spun at 100% CPU past its 'exit' event (its loader thread already gone, its esbuild child defunct, no
# inspector): in that teardown, which process.exit skips. A handle a test forgot no longer hangs the suite.
# The runner then exits the same way, before a file destination's last writes are flushed: the TAP copy goes
# through stderr (written synchronously), and so the runner's own stderr, if any, is in the TAP file too.
node --import tsx --test --test-force-exit --test-concurrency="${TEST_CONCURRENCY:-2}" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination=stderr "$@" 2>"$tap"
rc=$?
pass=$(grep -E '^# pass [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(grep -E '^# fail [0-9]+' "$tap" | tail -1 | awk '{print $3}')
skip=$(grep -E '^# skipped [0-9]+' "$tap" | tail -1 | awk '{print $3}')
# A test cancelled because its hook or parent failed did not pass: it counts as failed.
cancelled=$(grep -E '^# cancelled [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(( ${fail:-0} + ${cancelled:-0} ))
echo
echo "${pass:-0} passed, ${fail:-0} failed, ${skip:-0} skipped"
if [ -z "${pass:-}" ]; then echo "the runner reported no totals; its output is in $tap" >&2; fi
exit "$rc"
