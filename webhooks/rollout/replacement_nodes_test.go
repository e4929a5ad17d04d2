package rollout

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestDaemonPodOnACordonedNodeIsReplaced: a DaemonSet pod on a cordoned node
// (node.kubernetes.io/unschedulable:NoSchedule, which the node lifecycle controller adds on
// cordon, and which every drain starts with) or on a node under memory or disk pressure:
// kube's DaemonSet controller adds tolerations of those taints to every daemon pod
// (AddOrUpdateDaemonPodTolerations) and re-creates the pod there from the staged template.
// replaced read the template's own tolerations only, and said no pod is made.
func TestDaemonPodOnACordonedNodeIsReplaced(t *testing.T) {
	for _, taint := range []corev1.Taint{
		{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
		ds := &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "ds"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "a:2"}}}},
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
		w, err := workload.From(ds)
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent-x"}, Spec: corev1.PodSpec{NodeName: "node-0"}}
		h := &Handler{Reader: utiltesting.NewMemReader(nil, node)}
		if replaced, err := h.replaced(context.Background(), w, pod); err != nil || !replaced {
			t.Errorf("taint %s: replaced=%v err=%v; kube's DaemonSet controller tolerates it and re-creates the pod from the staged template", taint.Key, replaced, err)
		}
	}
}
