package workload

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func readyPod(status corev1.ConditionStatus, since time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u", CreationTimestamp: metav1.NewTime(since.Add(-time.Minute))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since.Add(time.Hour))},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}}}}
}

func TestPodReadinessAndAvailability(t *testing.T) {
	ready := readyPod(corev1.ConditionTrue, t0)
	p := PodOf(ready)
	if !p.Ready || !p.ReadySince.Equal(t0) || !p.Serving() || !PodServing(ready) {
		t.Errorf("a Ready pod: %+v", p)
	}
	if p.Available(time.Minute, t0.Add(30*time.Second)) || !p.Available(time.Minute, t0.Add(time.Minute)) {
		t.Error("a pod is available once it has been Ready for minReady")
	}
	terminating := ready.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	if PodOf(terminating).Serving() || PodServing(terminating) || PodOf(terminating).Available(0, t0.Add(time.Hour)) {
		t.Error("a terminating pod serves nothing")
	}
	notReady := readyPod(corev1.ConditionFalse, t0)
	if PodOf(notReady).Ready || PodServing(notReady) {
		t.Error("a pod whose Ready condition is False is not Ready")
	}
	if last := LastActivity([]corev1.Pod{*notReady, *ready}); !last.Equal(t0) {
		t.Errorf("LastActivity = %v, want the newest Ready transition, not another condition's", last)
	}
}

func TestKindsAndExpected(t *testing.T) {
	for _, k := range Kinds() {
		obj, err := New(k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewList(k); err != nil {
			t.Fatal(err)
		}
		if m, ok := MetaOf(obj); !ok || m.Kind != k {
			t.Errorf("MetaOf(New(%s)) = %+v, %v", k, m, ok)
		}
	}
	if _, err := New("CronJob"); err == nil {
		t.Error("an unguarded kind must be an error, never a fallback")
	}
	if _, err := NewList("ReplicaSet"); err == nil {
		t.Error("an unguarded kind must be an error, never a fallback")
	}
	d := &appsv1.Deployment{}
	if m, _ := MetaOf(d); m.Expected != 1 {
		t.Errorf("a Deployment without replicas expects %d pods, want 1 as the API server defaults it", m.Expected)
	}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 7}}
	if m, _ := MetaOf(ds); m.Expected != 7 || m.Kind != v1alpha1.KindDaemonSet {
		t.Errorf("a DaemonSet expects desiredNumberScheduled pods: %+v", m)
	}
	w, err := From(ds)
	if err != nil || w.Expected != 7 {
		t.Errorf("the rollout view of a DaemonSet expects %d pods (%v), want 7", w.Expected, err)
	}
	if _, ok := MetaOf(&corev1.Pod{}); ok {
		t.Error("a pod is not a workload")
	}
}
