package history

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestNumberedAfter: a Deployment flipped A -> B -> A -> B: kube renumbered A 3 (it was 1)
// and B 4 (it was 2), keeping the old numbers in revision-history, where a number that
// does not parse is left out. The numbers above 1 name B, A, B in that order; above 4,
// none.
func TestNumberedAfter(t *testing.T) {
	rs := func(name, revision, history string) appsv1.ReplicaSet {
		return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: controller("d"),
			Annotations: map[string]string{revisionAnnotation: revision, revisionHistoryAnnotation: history}},
			Spec: appsv1.ReplicaSetSpec{Template: tmpl(name)}}
	}
	h := History{Revisions: FromReplicaSets("d", []appsv1.ReplicaSet{rs("a", "3", "1"), rs("b", "4", "x,2")})}
	var got []string
	for _, n := range h.NumberedAfter(1) {
		got = append(got, n.Revision.Name+"@"+string(rune('0'+n.Number)))
	}
	if diff := cmp.Diff([]string{"b@2", "a@3", "b@4"}, got); diff != "" {
		t.Errorf("numbered after 1 (-want +got):\n%s", diff)
	}
	if n := h.NumberedAfter(4); len(n) != 0 {
		t.Errorf("numbered after the newest: %+v", n)
	}
}

// TestServingBefore: a DaemonSet's revision serves on node-1 (there before the rollout),
// node-4 (joined after it began) and node-x (not in the cache, counted): two of its three
// serving pods are progress of a rollout that began before node-4 joined; without nodes,
// all three are.
func TestServingBefore(t *testing.T) {
	began := t0.Add(-10 * time.Minute)
	cr := appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "ds-b", OwnerReferences: controller("s")}, Revision: 2,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"b"}]}}}}`)}}
	var pods []corev1.Pod
	for _, node := range []string{"node-1", "node-4", "node-x"} {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: "b"}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	joined := map[string]time.Time{"node-1": t0.Add(-time.Hour), "node-4": t0.Add(-time.Minute)}
	for _, c := range []struct {
		joined map[string]time.Time
		want   int32
	}{{joined, 2}, {nil, 3}} {
		revs, err := FromControllerRevisions("s", "ds", []appsv1.ControllerRevision{cr}, pods, c.joined)
		if err != nil {
			t.Fatal(err)
		}
		if got := revs[0].ServingBefore(began); got != c.want || revs[0].Serving != 3 {
			t.Errorf("nodes %v: ServingBefore = %d (serving %d), want %d of 3", c.joined, got, revs[0].Serving, c.want)
		}
	}
}
