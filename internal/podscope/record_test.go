package podscope

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// TestARecordReadsAsTheLeanPod: a pod held as a record reads as informer.LeanPod keeps it,
// whatever the pod (Ready or not, terminating, owned, without conditions); a record seen
// again by the transform is unchanged; a copying read shares nothing with the record.
func TestARecordReadsAsTheLeanPod(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	full := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "kas-0", Namespace: "tenant-a", UID: "u", ResourceVersion: "42", Generation: 3,
				Labels: map[string]string{"app": "kas"}, Annotations: map[string]string{"a": "b"}, CreationTimestamp: since,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "kas-1", UID: "rs", Controller: ptr.To(true)}},
				Finalizers:      []string{"f"}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: since, Reason: "r", Message: "m"}}},
		}
	}
	cases := map[string]func(*corev1.Pod){
		"ready":       func(*corev1.Pod) {},
		"not ready":   func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse },
		"no ready":    func(p *corev1.Pod) { p.Status.Conditions = p.Status.Conditions[:1] },
		"terminating": func(p *corev1.Pod) { p.DeletionTimestamp = &since },
		"orphan":      func(p *corev1.Pod) { p.OwnerReferences = nil; p.Spec.NodeName = "" },
	}
	for name, mut := range cases {
		p := full()
		mut(p)
		want, _ := informer.LeanPod(p.DeepCopy())
		rec, _ := recordPod(p.DeepCopy())
		again, _ := recordPod(rec)
		if again != rec {
			t.Errorf("%s: a record seen again is replaced", name)
		}
		for _, deep := range []bool{false, true} {
			var got corev1.Pod
			rec.(*podRecord).fill(&got, deep)
			if !equality.Semantic.DeepEqual(&got, want) {
				t.Errorf("%s (deep %v): read %+v, want %+v", name, deep, got, want)
			}
			if deep && len(got.Labels) > 0 {
				got.Labels["app"] = "changed"
				if rec.(*podRecord).Labels["app"] != "kas" {
					t.Errorf("%s: a copying read shares the record's labels", name)
				}
			}
		}
		if h := asPod(toolscache.DeletedFinalStateUnknown{Key: "k", Obj: rec}); !equality.Semantic.DeepEqual(h.(toolscache.DeletedFinalStateUnknown).Obj, want) {
			t.Errorf("%s: a tombstone's record reaches handlers as %+v", name, h)
		}
	}
}

// TestPodsOfOneControllerShareTheirLabels: the pods of one controller with the same labels
// and owners hold one map and one slice of them; a pod whose labels differ (relabelled, or
// of another template) keeps its own, and each reads as its own pod.
func TestPodsOfOneControllerShareTheirLabels(t *testing.T) {
	s := New(nil)
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "t", UID: "u-" + types.UID(name),
			Labels:          map[string]string{"app": app, "pod-template-hash": "h1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "kas-h1", UID: "rs", Controller: ptr.To(true)}}}}
	}
	record := func(p *corev1.Pod) *podRecord {
		r, err := s.recordPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*podRecord)
	}
	a, b, c := record(pod("a", "kas")), record(pod("b", "kas")), record(pod("c", "other"))
	same := func(x, y *podRecord) bool {
		return reflect.ValueOf(x.Labels).UnsafePointer() == reflect.ValueOf(y.Labels).UnsafePointer() &&
			&x.OwnerReferences[0] == &y.OwnerReferences[0]
	}
	if !same(a, b) {
		t.Error("two pods of one ReplicaSet with the same labels hold two copies of them")
	}
	if same(a, c) || c.Labels["app"] != "other" {
		t.Errorf("a pod with other labels shares the first pod's: %v", c.Labels)
	}
	for _, r := range []*podRecord{a, b, c} {
		var got corev1.Pod
		r.fill(&got, false)
		if got.Name != r.Name || got.Labels["app"] == "" || got.OwnerReferences[0].UID != "rs" {
			t.Errorf("pod %s reads as %+v", r.Name, got.ObjectMeta)
		}
	}
	// Past maxShared controllers, the table starts again: what it held is not kept alive.
	for i := range maxShared {
		p := pod("x", "kas")
		p.OwnerReferences[0].UID = types.UID(fmt.Sprint("rs-", i))
		record(p)
	}
	if n := len(s.sharing.by); n > maxShared {
		t.Errorf("the sharing table holds %d controllers, want at most %d", n, maxShared)
	}
}
