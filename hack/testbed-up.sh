#!/usr/bin/env bash
# Starts a local kwok cluster from the test bed's binaries: a real kube-apiserver, etcd,
# kube-controller-manager and kube-scheduler, kwok's fake nodes, and pod stages with
# realistic timing. Usage: hack/testbed-up.sh [nodes]   (default 4 nodes)
# The cluster's name is $HOLDFAST_CLUSTER (default holdfast); its kubeconfig is printed last.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/testbed-env.sh
source "$here/testbed-env.sh"

name="${HOLDFAST_CLUSTER:-holdfast}"
nodes="${1:-4}"

bash "$here/testbed-build.sh" >/dev/null
config="$(bash "$here/testbed-config.sh")"
# kwokctl runs kubectl from PATH: use the one built with the cluster.
export PATH="$TESTBED_BIN:$PATH"

# kwokctl logs every step; keep that in a file and show it only when something fails.
log="$HOLDFAST_CACHE/$name-kwokctl.log"
: >"$log"
quiet() { "$@" >>"$log" 2>&1 || { cat "$log" >&2; echo "testbed: failed: $*" >&2; exit 1; }; }

if kwokctl get clusters 2>/dev/null | grep -qx "$name"; then
	echo "testbed: cluster $name already exists" >&2
else
	echo "testbed: creating cluster $name" >&2
	quiet kwokctl create cluster --name "$name" --config "$config" --wait 2m
fi
quiet kwokctl scale node --name "$name" --replicas "$nodes"

kubeconfig="$HOLDFAST_CACHE/$name.kubeconfig"
kwokctl get kubeconfig --name "$name" >"$kubeconfig"
echo "testbed: cluster $name is up with $nodes nodes; kubectl: $TESTBED_BIN/kubectl --kubeconfig $kubeconfig" >&2
echo "$kubeconfig"
