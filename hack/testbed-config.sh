#!/usr/bin/env bash
# Writes the kwokctl configuration of the test bed and prints its path: the binary
# runtime with the locally built control plane, etcd, kwok and kubectl (the controller
# manager's controllers each act with their own service account, as in a kubeadm
# cluster), and kwok Stages that give pods realistic timing (Ready 1–6 s after
# scheduling, lingering while terminating; annotations on a pod change both, as
# e2e/replay_test.go's do) and nodes a lease heartbeat.
set -euo pipefail
# shellcheck source=hack/testbed-env.sh
source "$(dirname "$0")/testbed-env.sh"

out="$HOLDFAST_CACHE/testbed/kwokctl-$KUBE_VERSION-$ETCD_VERSION-$KWOK_VERSION.yaml"
{
	cat <<EOF2
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  kubeVersion: $KUBE_VERSION
  etcdVersion: ${ETCD_VERSION#v}
  kubeApiserverBinary: $TESTBED_BIN/kube-apiserver
  kubeControllerManagerBinary: $TESTBED_BIN/kube-controller-manager
  kubeSchedulerBinary: $TESTBED_BIN/kube-scheduler
  kubectlBinary: $TESTBED_BIN/kubectl
  etcdBinary: $TESTBED_BIN/etcd
  kwokControllerBinary: $TESTBED_BIN/kwok
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: use-service-account-credentials
    value: "true"
EOF2
	for f in "$TESTBED_STAGES"/node/fast/node-initialize.yaml \
		"$TESTBED_STAGES"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		"$TESTBED_STAGES"/pod/general/pod-*.yaml; do
		echo "---"
		cat "$f"
	done
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
