#!/usr/bin/env bash
# Stops and deletes the local kwok cluster started by testbed-up.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/testbed-env.sh
source "$here/testbed-env.sh"

name="${HOLDFAST_CLUSTER:-holdfast}"
export PATH="$TESTBED_BIN:$PATH"

# A holdfast left running in the background by `make demo`.
pidfile="$HOLDFAST_CACHE/holdfast.pid"
if [ -f "$pidfile" ]; then
	kill "$(cat "$pidfile")" 2>/dev/null || true
	rm -f "$pidfile"
fi
if kwokctl get clusters 2>/dev/null | grep -qx "$name"; then
	kwokctl delete cluster --name "$name"
else
	echo "testbed: no cluster named $name" >&2
fi
rm -f "$HOLDFAST_CACHE/$name.kubeconfig"
