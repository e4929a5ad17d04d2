package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/memstore"
)

// TestRecorderTakesADeleteAndRecreateBetweenLooks: a Deployment deleted and created again
// under its name before the recorder looked at the delete (kubectl replace --force, or the
// two events one request in its queue). The delete handed the deleted object to the
// recorder; the journal records the new one as created in place of it (journal lineage),
// and once settled, a start of the deleted one holds no fleet slot until it lapses. The
// recorder threw the deleted object away when the name had a workload again.
func TestRecorderTakesADeleteAndRecreateBetweenLooks(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	store := memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID})
	store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"kubernetes.io/metadata.name": "t"}}})
	labels := map[string]string{"app": "web"}
	store.Put(&v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}}}})
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
	deployment := func(uid types.UID) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", UID: uid, Generation: 1, Labels: labels},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	}
	replicaSet := func(owner types.UID) *appsv1.ReplicaSet {
		t := tmpl
		t.Labels = map[string]string{"app": "web", "pod-template-hash": "a1"}
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web-a1", UID: "rs-" + owner, Labels: t.Labels,
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)), Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: owner, Controller: ptr.To(true)}}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: t},
			Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	}
	pods := func(owner types.UID) {
		for i := range 2 {
			store.Put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: fmt.Sprintf("web-a1-%s-%d", owner, i),
				Labels:          map[string]string{"app": "web", "pod-template-hash": "a1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-a1", UID: "rs-" + owner, Controller: ptr.To(true)}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}})
		}
	}
	deleted := deployment("d1")
	store.Put(deleted)
	store.Put(replicaSet("d1"))
	pods("d1")
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "t", Name: "web"}}
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, "t", "web")}
	observed := func() *journal.Observed {
		cm := &corev1.ConfigMap{}
		if err := store.Get(ctx, key, cm); err != nil {
			t.Fatalf("no journal: %v", err)
		}
		j, err := journal.Decode(cm)
		if err != nil {
			t.Fatal(err)
		}
		return j.Observed
	}
	r := &JournalRecorder{Client: memstore.Writer{Store: store}, Kind: v1alpha1.KindDeployment, Namespace: holdfastNamespace,
		Clock: clocktesting.NewFakePassiveClock(now)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	// Deleted with its ReplicaSet and pods, and created again, settled on the template,
	// before the recorder looked: the delete handed it the deleted object.
	for _, o := range []client.Object{replicaSet("d1"), deleted} {
		store.Remove(o)
	}
	for i := range 2 {
		store.Remove(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: fmt.Sprintf("web-a1-d1-%d", i)}})
	}
	r.gone.Store(req.NamespacedName, deleted)
	store.Put(deployment("d2"))
	store.Put(replicaSet("d2"))
	pods("d2")
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if o := observed(); !o.Replaced("d1") {
		t.Errorf("lineage: previous %q, settled %v; want d1 replaced by the settled d2", o.Previous, o.Settled)
	}
}
