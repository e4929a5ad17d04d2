package history

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
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
// node-4 (joined after it began) and node-x (not in the cache: deleted, its pod not yet
// collected): one of its three serving pods is progress of a rollout that began before
// node-4 joined; without nodes, all three are.
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
	}{{joined, 1}, {nil, 3}} {
		revs, err := FromControllerRevisions("s", "ds", []appsv1.ControllerRevision{cr}, pods, c.joined)
		if err != nil {
			t.Fatal(err)
		}
		if got := revs[0].ServingBefore(began); got != c.want || revs[0].Serving != 3 {
			t.Errorf("nodes %v: ServingBefore = %d (serving %d), want %d of 3", c.joined, got, revs[0].Serving, c.want)
		}
	}
}

// TestDaemonNodes: the nodes a DaemonSet's rollout counts are those it runs on by its
// template (kube's own count): not a node its node selector leaves out, nor one with a
// taint it does not tolerate; a node being deleted counts until it is gone, as kube's
// controller keeps its pod. So a node it never ran on leaving, or
// a pod of it deleted, changes nothing of its rollout's progress (journal.Observe).
func TestDaemonNodes(t *testing.T) {
	spec := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "agents"}, Containers: []corev1.Container{{Name: "c", Image: "agent"}}}}
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "agent"}, Template: workload.FromSpec(&spec, "")}
	node := func(name string, labels map[string]string, age time.Duration, mut func(*corev1.Node)) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
		if mut != nil {
			mut(&n)
		}
		return n
	}
	agents := map[string]string{"pool": "agents"}
	nodes := []corev1.Node{
		node("a-1", agents, time.Hour, nil),
		node("a-2", agents, time.Minute, nil),
		node("other", map[string]string{"pool": "gpu"}, time.Hour, nil),
		node("tainted", agents, time.Hour, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		}),
		node("going", agents, time.Hour, func(n *corev1.Node) {
			n.DeletionTimestamp, n.Finalizers = ptr.To(metav1.NewTime(t0)), []string{"x"}
		}),
	}
	var h History
	for _, at := range daemonNodes(w, nodes) {
		h.Nodes = append(h.Nodes, at)
	}
	if n, ok := h.NodesBefore(t0.Add(-10 * time.Minute)); !ok || n != 2 {
		t.Errorf("nodes the DaemonSet runs on that joined before its rollout began: %d (%t), want 2 (a-1, going)", n, ok)
	}
	if n, ok := h.NodesBefore(t0); !ok || n != 3 {
		t.Errorf("nodes the DaemonSet runs on now: %d (%t), want 3 (a-1, a-2, going)", n, ok)
	}
	if _, ok := (History{}).NodesBefore(t0); ok {
		t.Error("nodes not read are known")
	}
}

// TestDaemonSetProgressAndNodesFromOneSet: n1..n3, which run updated pods, were relabelled
// out of the DaemonSet's node pool (kube deletes those pods, not yet), n10, a node being
// deleted, still runs it (kube's controller counts it until it is gone), and n9 is gone
// from the cache while its pod lingers. The pods serving (ServingBefore) and the nodes that
// need the update (NodesBefore) are read from the same nodes, through the cache's
// transforms: n4, n5 and n10 of the six it runs on. Counted from every cached node, the
// pods of n1..n3 held the journal's progress mark above what the nodes left could reach,
// and a healthy rollout read as stalled.
func TestDaemonSetProgressAndNodesFromOneSet(t *testing.T) {
	spec := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "agents"}, Containers: []corev1.Container{{Name: "c", Image: "b"}}}}
	w := &workload.Workload{Ref: workload.Ref{Kind: v1alpha1.KindDaemonSet, Namespace: "kube-system", Name: "ds", UID: "s"},
		Template: workload.FromSpec(&spec, ""), Rollout: workload.Rollout{InProgress: true}}
	cr := func(hash, image string, n int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ds-" + hash, OwnerReferences: controller("s")}, Revision: n,
			Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"agent"}},"spec":{"nodeSelector":{"pool":"agents"},"containers":[{"name":"c","image":"` + image + `"}]}}}}`)}}
	}
	objs := []client.Object{cr("a", "a", 1), cr("b", "b", 2)}
	for i, hash := range []string{"b", "b", "b", "b", "b", "a", "a", "a", "b", "b"} {
		name := fmt.Sprintf("n%d", i+1)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "agents"}, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
		switch {
		case i < 3:
			n.Labels["pool"] = "gpu"
		case name == "n10":
			n.DeletionTimestamp, n.Finalizers = ptr.To(metav1.NewTime(t0.Add(-time.Minute))), []string{"example.com/drain"}
		}
		if name != "n9" {
			objs = append(objs, n)
		}
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent-" + name, OwnerReferences: controller("s"),
			Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: hash}},
			Spec:   corev1.PodSpec{NodeName: name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	r := fake.NewClientBuilder().WithObjects(objs...).
		WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).Build()
	cache := informer.CacheView(r, informer.Options(Slim, workload.Pack, "holdfast-system", labels.Everything(), nil))
	h, err := Read(context.Background(), cache, w)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(h.Revisions, func(r Revision) bool { return r.Name == "ds-b" })
	if i < 0 {
		t.Fatalf("no revision ds-b in %+v", h.Revisions)
	}
	nodes, ok := h.NodesBefore(t0)
	if got := h.Revisions[i].ServingBefore(t0); got != 3 || !ok || nodes != 6 {
		t.Errorf("serving on the nodes it runs on: %d of %d nodes (known %t), want 3 (n4, n5, n10) of 6 (n4..n8, n10)", got, nodes, ok)
	}
}
