#!/usr/bin/env bash
# Runs every test with Node's test runner: the spec reporter for people, and a TAP copy from which the plain
# closing line "N passed, N failed" is printed. The exit code is the runner's.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp
tap=.tmp/test-results.tap
# No --test-force-exit: with it, a file's process could exit before its last results reached the runner, and
# those tests silently vanished from the counts (seen: datum.test.ts's last suite missing from a passing run).
# A test file that passed every test once spun in Node's own teardown, past its 'exit' event (twice now, the second
# time on 2026-11-27: node::Environment::CleanupHandles looping in uv_run, per gdb): test/exit-at-exit-event.ts,
# preloaded into every file's process, ends it at the 'exit' event, when every result is written. The whole run
# still has a bound well under CI's 90 minutes; `timeout` ends anything else that never ends with a clear failure.
limit="${TEST_TIME_LIMIT:-45m}"
timeout --kill-after=30s "$limit" node --import tsx --import "$PWD/test/exit-at-exit-event.ts" --test --test-concurrency="${TEST_CONCURRENCY:-2}" \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "the test run did not end within $limit (TEST_TIME_LIMIT); a test file that never exits is listed by: ps -ef | grep -- --test" >&2
fi
pass=$(grep -E '^# pass [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(grep -E '^# fail [0-9]+' "$tap" | tail -1 | awk '{print $3}')
skip=$(grep -E '^# skipped [0-9]+' "$tap" | tail -1 | awk '{print $3}')
# A test cancelled because its hook or parent failed did not pass: it counts as failed.
cancelled=$(grep -E '^# cancelled [0-9]+' "$tap" | tail -1 | awk '{print $3}')
fail=$(( ${fail:-0} + ${cancelled:-0} ))
echo
echo "${pass:-0} passed, ${fail:-0} failed, ${skip:-0} skipped"
if [ -z "${pass:-}" ]; then echo "the runner reported no totals; see $tap" >&2; fi
exit "$rc"
