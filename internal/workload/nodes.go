package workload

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// daemonTolerations are the tolerations kube's DaemonSet controller adds to every daemon
// pod (AddOrUpdateDaemonPodTolerations, pkg/controller/daemon/util/daemonset_util.go);
// hostNetwork pods also tolerate network-unavailable.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// NodesFor counts the cached nodes a DaemonSet with this pod template runs a pod on, as
// kube's DaemonSet controller decides it (predicates in pkg/controller/daemon/
// daemon_controller.go): its node name, required node affinity and node selector, and
// the NoSchedule and NoExecute taints its tolerations (and the daemon pods' own) do not
// tolerate. It is the DaemonSet's desiredNumberScheduled before the controller has
// written its status (on CREATE the API server clears it), what its percentages resolve
// against.
func NodesFor(ctx context.Context, r client.Reader, spec *corev1.PodSpec) (int32, error) {
	var nodes corev1.NodeList
	if err := informer.List(ctx, r, &nodes); err != nil {
		return 0, err
	}
	tolerations := DaemonTolerations(spec)
	affinity := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec})
	var n int32
	for i := range nodes.Items {
		if daemonFits(spec, tolerations, affinity, &nodes.Items[i]) {
			n++
		}
	}
	return n, nil
}

// DaemonTolerations are the tolerations of a daemon pod of the template spec: its own and
// those kube's DaemonSet controller adds (daemonTolerations; network-unavailable for
// hostNetwork pods).
func DaemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	tolerations := append(append([]corev1.Toleration(nil), spec.Tolerations...), daemonTolerations...)
	if spec.HostNetwork {
		tolerations = append(tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return tolerations
}

// DaemonRunsOn is whether kube's DaemonSet controller runs a pod of the template spec on
// node (NodesFor): a cordoned node, or one under memory or disk pressure, still gets one.
func DaemonRunsOn(spec *corev1.PodSpec, node *corev1.Node) bool {
	return daemonFits(spec, DaemonTolerations(spec), nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec}), node)
}

func daemonFits(spec *corev1.PodSpec, tolerations []corev1.Toleration, affinity nodeaffinity.RequiredNodeAffinity, node *corev1.Node) bool {
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false
	}
	if fits, _ := affinity.Match(node); !fits { // kube ignores parse errors too
		return false
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, false)
	return !untolerated
}
