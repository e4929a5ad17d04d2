#!/usr/bin/env bash
# Runs one test layer with `go test -v`, keeps its full output in _output/test-<layer>.log,
# shows failures and the package results, and ends with one summary line:
#   <layer>: N passed, N failed, N skipped
# Usage: hack/test-layer.sh <layer> <go test arguments…>
set -uo pipefail
layer="$1"
shift
mkdir -p _output
log="_output/test-$layer.log"
rm -f "_output/summary-$layer.txt"

go test -v "$@" >"$log" 2>&1
rc=$?

# Package results and anything that failed, without the per-test noise.
grep -E '^(ok|FAIL|---|panic:|SCENARIO|RELIABILITY|\s+--- FAIL)|^\s+\S+_test\.go:[0-9]+:' "$log" | grep -vE '^\s*--- (PASS|SKIP)' || true

passed=$(grep -cE '^\s*--- PASS:' "$log")
failed=$(grep -cE '^\s*--- FAIL:' "$log")
skipped=$(grep -cE '^\s*--- SKIP:' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	# A build failure or a crash in TestMain fails the layer without a failed test.
	failed=1
	tail -n 40 "$log"
fi
echo "$layer: $passed passed, $failed failed, $skipped skipped" | tee "_output/summary-$layer.txt"
exit "$rc"
