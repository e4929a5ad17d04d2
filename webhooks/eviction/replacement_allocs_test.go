package eviction

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestUnselectedStatefulSetPodAllocs: the eviction of a StatefulSet's pod that no policy
// selects, with a RolloutPolicy targeting StatefulSets in force, costs the fast path
// (BenchmarkEvictionUnselected, 25) and the rollout guard's look at its owner: the policies
// listed, the StatefulSet read from the cache to see its strategy and labels (found by
// review: 50 at first, before the look was ordered to stop at the first answer).
func TestUnselectedStatefulSetPodAllocs(t *testing.T) {
	rp := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}}}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", UID: "sts-uid", Labels: map[string]string{"app": "db"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:2", Args: []string{"--a", "--b"}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0", UID: "pod-uid",
		Labels:          map[string]string{"app": "db"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	measure := func(withReplacements bool) float64 {
		h, body := evictionScene(t, pod, withReplacements, rp, sts)
		again := utiltesting.Repeat(h, Path, body)
		return testing.AllocsPerRun(100, func() { again() })
	}
	without, with := measure(false), measure(true)
	t.Logf("allocs without Replacements %.0f, with %.0f", without, with)
	if with > maxUnselectedAllocs+10 {
		t.Errorf("the eviction of a StatefulSet's pod no policy selects allocates %.0f times with Replacements wired as in production (%.0f without), more than %d", with, without, maxUnselectedAllocs+10)
	}
}
