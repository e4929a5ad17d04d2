package workload

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// NodesFor counts the cached nodes a pod with this node selector may run on: an upper
// bound of a DaemonSet's desiredNumberScheduled (taints and affinity may rule out more),
// which is what its percentages resolve against before the DaemonSet controller has
// written its status (on CREATE the API server clears it).
func NodesFor(ctx context.Context, r client.Reader, nodeSelector map[string]string) (int32, error) {
	var nodes corev1.NodeList
	if err := informer.List(ctx, r, &nodes); err != nil {
		return 0, err
	}
	sel := labels.SelectorFromSet(nodeSelector)
	var n int32
	for i := range nodes.Items {
		if sel.Matches(labels.Set(nodes.Items[i].Labels)) {
			n++
		}
	}
	return n, nil
}
