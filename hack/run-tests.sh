#!/usr/bin/env bash
# Runs every test with Node's test runner: the spec reporter for people, and a TAP copy from which the plain
# closing line "N passed, N failed" is printed. The exit code is the runner's.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp
tap=.tmp/test-results.tap
node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" "$@"
rc=$?
pass=$(grep -E '^# pass [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(grep -E '^# fail [0-9]+' "$tap" | tail -1 | awk '{print $3}')
skip=$(grep -E '^# skipped [0-9]+' "$tap" | tail -1 | awk '{print $3}')
# A test cancelled because its hook or parent failed did not pass: it counts as failed.
cancelled=$(grep -E '^# cancelled [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(( ${fail:-0} + ${cancelled:-0} ))
echo
echo "${pass:-0} passed, ${fail:-0} failed, ${skip:-0} skipped"
exit "$rc"
