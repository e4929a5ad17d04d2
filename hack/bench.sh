#!/usr/bin/env bash
# make bench: the Go benchmarks (median of 5 runs) and the load harness (test/performance),
# one line per figure: BENCH <name> <value> <unit>. Not part of `make test`; the tests
# guard allocations only (TestRolloutReviewAllocs, TestEvictionUnselectedAllocs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/testbed-env.sh
source hack/testbed-env.sh

out=_output/bench
mkdir -p "$out"
# -p 1: one package's benchmarks at a time, so that they do not share the two cores.
go test -p 1 -run '^$' -bench '^(BenchmarkRolloutReview|BenchmarkEvictionUnselected|BenchmarkSimulate5000Pods|BenchmarkCheck1000Changes20Policies)$' -benchmem -count 5 \
  ./webhooks/rollout ./webhooks/eviction ./cmd/holdfast/simulate/sim ./cmd/holdfast/check | tee "$out/go-bench.txt" >&2

# Median ns/op and allocs/op per benchmark.
awk '
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
    for (i = 2; i <= NF; i++) {
      if ($(i+1) == "ns/op") ns[name] = ns[name] " " $i
      if ($(i+1) == "allocs/op") allocs[name] = allocs[name] " " $i
    }
  }
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
  }
  END {
    for (name in ns) {
      m = median(ns[name])
      if (m >= 1e7) printf "BENCH go-%s %.0f ms/op\n", name, m / 1e6
      else printf "BENCH go-%s %.1f us/op\n", name, m / 1000
      printf "BENCH go-%s-allocs %d allocs/op\n", name, median(allocs[name])
    }
  }' "$out/go-bench.txt" | sort

make --no-print-directory build >&2
KUBEBUILDER_ASSETS="$TESTBED_BIN" go run ./test/performance "$@"
