package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/memstore"
)

// lagging is the recorder's client over the API server (store): it reads and writes there,
// but reads the objects lags names from its own cache, which the test moves.
type lagging struct {
	memstore.Writer
	cache *memstore.Store
	lags  func(client.Object) bool
}

func (c lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.lags(obj) {
		return c.cache.Get(ctx, key, obj, opts...)
	}
	return c.Writer.Get(ctx, key, obj, opts...)
}

// journals names the journals' ConfigMaps.
func journals(obj client.Object) bool {
	_, ok := obj.(*corev1.ConfigMap)
	return ok
}

// TestHandDeletedJournalIsRebuilt: the recorder creates a workload's journal; the
// journal is deleted by hand (or by another writer) before the recorder's next look. Its
// cache then shows the journal gone, as it showed it before the create: a missing journal
// cannot tell "not seen yet" from "seen, then deleted". The recorder read its own copy as
// the journal, found nothing to change and wrote nothing: the journal stayed deleted (read
// as absent by every decision) until the workload next changed. The delete event now
// forgets the copy (journalEvents), and the journal is rebuilt.
func TestHandDeletedJournalIsRebuilt(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	store := memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID})
	cache := memstore.New(nil) // the recorder's journal cache: never sees the create, nor the delete
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
	store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"kubernetes.io/metadata.name": "t"}}})
	store.Put(&v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			Selector: &metav1.LabelSelector{MatchLabels: labels}}}})
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", UID: "d1", Generation: 1, Labels: labels,
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	store.Put(d)
	rsTmpl := *tmpl.DeepCopy()
	rsTmpl.Labels = map[string]string{"app": "web", "pod-template-hash": "5d4f"}
	store.Put(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web-5d4f", UID: "rs1",
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		Annotations:       map[string]string{"deployment.kubernetes.io/revision": "1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d1",
			Controller: ptr.To(true)}}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: rsTmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}})

	r := &JournalRecorder{Client: lagging{Writer: memstore.Writer{Store: store}, cache: cache, lags: journals}, Kind: v1alpha1.KindDeployment,
		Namespace: holdfastNamespace, Clock: clocktesting.NewFakePassiveClock(now)}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "t", Name: "web"}}
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, "t", "web")}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := store.Get(ctx, key, cm); err != nil {
		t.Fatalf("the recorder wrote no journal: %v", err)
	}
	// A look before the cache shows the create reads the recorder's own copy, and is made
	// again soon, so that the copy stands in for the cache only briefly.
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter != ownWriteRecheck {
		t.Errorf("a look that read the recorder's own copy: %+v, %v; want it made again after %s", res, err, ownWriteRecheck)
	}
	// Deleted by hand. The delete reaches the recorder through its journal watch, which
	// enqueues the workload; the cache shows no journal.
	store.Remove(cm)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.journalEvents().Delete(ctx, event.DeleteEvent{Object: cm}, q)
	if q.Len() != 1 {
		t.Fatalf("the journal's delete enqueued %d requests, want its workload", q.Len())
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := store.Get(ctx, key, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the journal deleted by hand is not rebuilt: %v", err)
	}
}
