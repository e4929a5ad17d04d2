package history

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestAdoptableKeepsOnlyTheOrdinalsInRange: a StatefulSet web deleted orphaning its three
// pods (web-0..2, revision web-1) is created again. kube's controller keeps the ordinals in
// [ordinals.start, start+replicas), one pod each, and deletes the others, creating the
// missing ordinals from its template: a re-create numbered from 3 keeps none of the three,
// and one of two replicas keeps two. Kept counts those; Live still counts every member
// until it is gone.
func TestAdoptableKeepsOnlyTheOrdinalsInRange(t *testing.T) {
	raw := []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`)
	objs := []client.Object{&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{"app": "a"}},
		Revision: 1, Data: runtime.RawExtension{Raw: raw}}}
	// Pods kube's controller does not keep: a name that is no ordinal of web's (no member,
	// so not web's pod at all: it is not counted live either); a second pod
	// of ordinal 1, terminating, and one of ordinal 0 that failed (it keeps one per
	// ordinal, and replaces one going or ended); a second pod of ordinal 2, running (one
	// of the two is kept); ordinal 3 still controlled by the deleted web, whose cascading
	// delete the garbage collector has not finished. Ordinal 4 is the created web's own
	// already: kept.
	for _, name := range []string{"web-x", "web-00", "web-01", "web-002", "web-3", "web-4"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{"app": "a", appsv1.ControllerRevisionHashLabelKey: "web-1"}, CreationTimestamp: metav1.NewTime(t0)}}
		switch name {
		case "web-3":
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "deleted", Controller: ptr.To(true)}}
		case "web-4":
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "created", Controller: ptr.To(true)}}
		case "web-00": // listed before web-0, and failed: it holds no ordinal from web-0
			p.Status.Phase = corev1.PodFailed
		case "web-01": // listed before web-1, and going: it holds no ordinal from web-1
			p.DeletionTimestamp, p.Finalizers = ptr.To(metav1.NewTime(t0)), []string{"example.com/f"}
		}
		objs = append(objs, p)
	}
	for i := range 3 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("web-%d", i),
			Labels: map[string]string{"app": "a", appsv1.ControllerRevisionHashLabelKey: "web-1"}, CreationTimestamp: metav1.NewTime(t0)}})
	}
	r := utiltesting.NewMemReader(nil, objs...)
	for _, tc := range []struct {
		replicas, start int32
		kept            int32
	}{{3, 0, 3}, {2, 0, 2}, {3, 3, 1}, {3, 1, 2}, {5, 0, 4}, {4, 0, 3}} {
		sts := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"namespace":"ns","name":"web","uid":"created"},
			"spec":{"replicas":%d,"ordinals":{"start":%d},"selector":{"matchLabels":{"app":"a"}},"updateStrategy":{"type":"OnDelete"},
			"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"y"}]}}}}`, tc.replicas, tc.start)
		w, err := workload.Decode(v1alpha1.KindStatefulSet, []byte(sts))
		if err != nil {
			t.Fatal(err)
		}
		h, err := ReadAdoptable(context.Background(), r, w)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Revisions) != 1 || h.Revisions[0].Kept != tc.kept || h.Revisions[0].Live != 7 {
			t.Errorf("replicas %d from ordinal %d: revisions %+v, want web-1 keeping %d of its 7 live pods", tc.replicas, tc.start, h.Revisions, tc.kept)
		}
	}
}

// TestReadSelectedCountsEveryLivePodTheSelectorMatches: what a workload created in place
// of a deleted one may still adopt or wait on counts, whatever owns it: its own pods, an
// orphan, a pod the deleted one still controls (terminating), not a pod that ended nor
// one its selector does not match, nor one in another namespace.
func TestReadSelectedCountsEveryLivePodTheSelectorMatches(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: "created"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}}}}}
	w, err := workload.From(ds)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, name, app string, owner types.UID, phase corev1.PodPhase, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}, Status: corev1.PodStatus{Phase: phase}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: owner, Controller: ptr.To(true)}}
		}
		if terminating {
			p.DeletionTimestamp, p.Finalizers = ptr.To(metav1.NewTime(t0)), []string{"example.com/f"}
		}
		return p
	}
	r := utiltesting.NewMemReader(nil,
		pod("ns", "own", "agent", "created", corev1.PodRunning, false),
		pod("ns", "orphan", "agent", "", corev1.PodRunning, false),
		pod("ns", "going", "agent", "deleted", corev1.PodRunning, true),
		pod("ns", "ended", "agent", "deleted", corev1.PodSucceeded, false),
		pod("ns", "other", "proxy", "", corev1.PodRunning, false),
		pod("elsewhere", "own", "agent", "", corev1.PodRunning, false))
	var h History
	if err := h.ReadSelected(context.Background(), r, w); err != nil {
		t.Fatal(err)
	}
	if !h.SelectedRead || h.Selected != 3 {
		t.Errorf("selected %d (read %v), want 3: its own, the orphan and the one terminating", h.Selected, h.SelectedRead)
	}
	// A Deployment's: also the replicas an orphaned ReplicaSet still wants, whatever pods it
	// has now (its pods may not be created yet, a quota refusing them), not its own sets'.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agent", UID: "created"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}}}}}
	wd, err := workload.From(dep)
	if err != nil {
		t.Fatal(err)
	}
	set := func(name string, owner types.UID, replicas int32) *appsv1.ReplicaSet {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "agent"}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
		if owner != "" {
			rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "agent", UID: owner, Controller: ptr.To(true)}}
		}
		return rs
	}
	r = utiltesting.NewMemReader(nil, pod("ns", "own", "agent", "", corev1.PodRunning, false),
		set("agent-own", "created", 1), set("agent-orphan", "", 2), set("agent-scaled-down", "", 0), set("agent-going", "deleted", 1))
	h = History{}
	if err := h.ReadSelected(context.Background(), r, wd); err != nil {
		t.Fatal(err)
	}
	if h.Selected != 4 {
		t.Errorf("a Deployment's selected %d, want 4: its pod, 2 the orphaned set wants and 1 the deleted one's", h.Selected)
	}
}
