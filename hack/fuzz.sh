#!/usr/bin/env bash
# make fuzz: run each fuzz target for the given time (default 30s) and print one line per
# target: RELIABILITY fuzz-<target> panics=<n> failures=<n> execs=<n>. A failing input is
# kept under testdata/fuzz/ by Go; the exit status is non-zero when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-30s}"
targets=(
  "./webhooks/rollout FuzzRolloutReview"
  "./webhooks/rollout FuzzRolloutHandler"
  "./webhooks/rollout FuzzLeanDecidesAsTyped"
  "./webhooks/eviction FuzzEvictionReview"
  "./internal/policy FuzzPolicyTargets"
  "./internal/workload FuzzDecodeReadsAsTyped"
)
mkdir -p _output/fuzz
status=0
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  log="_output/fuzz/$name.log"
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1
  rc=$?
  panics=$(grep -c '^panic:' "$log" || true)
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  failures=0
  if [ "$rc" -ne 0 ]; then failures=1; status=1; fi
  echo "RELIABILITY fuzz-$name panics=$panics failures=$failures execs=${execs:-0} time=$fuzztime"
done
# The model explorers, long: many more sequences than `make test` runs.
sequences="${MODEL_SEQUENCES:-50000}"
log="_output/fuzz/eviction-model.log"
if ! go test -v -count=1 -run '^TestEvictionModel$' ./webhooks/eviction -args -model.sequences="$sequences" >"$log" 2>&1; then
  status=1
  tail -n 40 "$log"
fi
grep '^RELIABILITY' "$log" || { echo "RELIABILITY eviction-model failed to run (see $log)"; status=1; }
log="_output/fuzz/rollout-model.log"
if ! go test -v -count=1 -timeout 60m -run '^TestRolloutModel$' ./webhooks/rollout -args -rollout-model.sequences="$sequences" >"$log" 2>&1; then
  status=1
  grep -A 20 'invariant violations' "$log" | head -n 40
fi
grep '^RELIABILITY' "$log" || { echo "RELIABILITY rollout-model failed to run (see $log)"; status=1; }
log="_output/fuzz/rollout-fleet-model.log"
if ! go test -v -count=1 -timeout 60m -run '^TestRolloutFleetModel$' ./webhooks/rollout -args -rollout-fleet-model.sequences="$sequences" >"$log" 2>&1; then
  status=1
  grep -A 20 'invariant violations' "$log" | head -n 40
fi
grep '^RELIABILITY' "$log" || { echo "RELIABILITY rollout-fleet-model failed to run (see $log)"; status=1; }
exit "$status"
