#!/usr/bin/env bash
# Writes the kwok Stage configuration that gives pods realistic timing: Ready 1–6 s
# after scheduling, lingering while terminating. Prints the file's path.
set -euo pipefail
# shellcheck source=hack/testbed-env.sh
source "$(dirname "$0")/testbed-env.sh"

out="$HOLDFAST_CACHE/testbed/kwok-$KWOK_VERSION-realistic-stages.yaml"
if [ ! -s "$out" ]; then
	{
		for f in "$TESTBED_STAGES"/node/fast/node-initialize.yaml \
			"$TESTBED_STAGES"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
			"$TESTBED_STAGES"/pod/general/pod-*.yaml; do
			echo "---"
			cat "$f"
		done
	} >"$out.tmp"
	mv "$out.tmp" "$out"
fi
echo "$out"
