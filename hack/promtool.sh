#!/usr/bin/env bash
# Builds promtool, pinned to PROMTOOL_VERSION (the github.com/prometheus/prometheus Go
# module's version), from source through the Go module proxy, and caches it by version
# outside the checkout, as the test bed's binaries are. Prints the binary's path last.
# The first build takes several minutes on 2 cores; later runs print the cached path.
set -euo pipefail

# shellcheck source=hack/testbed-env.sh
source "$(dirname "$0")/testbed-env.sh"

PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
dir="$HOLDFAST_CACHE/tools/promtool-$PROMTOOL_VERSION"

if [ ! -x "$dir/promtool" ]; then
	printf 'promtool: building %s (once)\n' "$PROMTOOL_VERSION" >&2
	mkdir -p "$dir"
	# Outside the checkout, so that holdfast's go.mod plays no part in the build.
	(cd "$dir" && GOBIN="$dir" go install "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION") >&2
fi
echo "$dir/promtool"
