package controller

import (
	"context"
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

// TestRecorderReadsTheNamespaceLiveBeforeANewRevision: an administrator relabels a
// namespace out of a policy's selection and a tenant then changes a workload's template
// there (the API server sends it to no guard). The leader's workload cache sees the change
// before its namespace cache sees the relabel. The recorder journaled the unjudged template
// as the current revision, which a relabel-in later read as known (no minInterval,
// revertWindow or window held it). It now reads the namespace from the API server before
// journaling a new revision, and retires the journal instead.
func TestRecorderReadsTheNamespaceLiveBeforeANewRevision(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	store := memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID})
	hosted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"kubernetes.io/metadata.name": "t", "tier": "hosted"}}}
	store.Put(hosted)
	labels := map[string]string{"app": "web"}
	store.Put(&v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "hosted"}}}}})
	tmpl := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}}}
	}
	deployment := func(gen int64, image string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", UID: "d1", Generation: gen, Labels: labels,
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl(image)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	}
	replicaSet := func(hash, revision, image string, replicas int32, created time.Time) *appsv1.ReplicaSet {
		t := tmpl(image)
		t.Labels = map[string]string{"app": "web", "pod-template-hash": hash}
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web-" + hash, UID: types.UID("rs-" + hash),
			CreationTimestamp: metav1.NewTime(created), Annotations: map[string]string{"deployment.kubernetes.io/revision": revision},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d1", Controller: ptr.To(true)}}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Template: t},
			Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas}}
	}
	store.Put(deployment(1, "web:1"))
	store.Put(replicaSet("a1", "1", "web:1", 2, now.Add(-time.Hour)))
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "t", Name: "web"}}
	key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, "t", "web")}
	revisions := func() (int, bool) {
		cm := &corev1.ConfigMap{}
		if err := store.Get(ctx, key, cm); err != nil {
			t.Fatalf("no journal: %v", err)
		}
		j, err := journal.Decode(cm)
		if err != nil {
			t.Fatal(err)
		}
		return len(j.Revisions), j.Deleted != nil
	}
	recorder := func(live client.Reader, c client.Client) *JournalRecorder {
		return &JournalRecorder{Client: c, Live: live, Kind: v1alpha1.KindDeployment, Namespace: holdfastNamespace,
			Clock: clocktesting.NewFakePassiveClock(now)}
	}
	if _, err := recorder(store, memstore.Writer{Store: store}).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n, _ := revisions(); n != 1 {
		t.Fatalf("the guarded workload's journal holds %d revisions, want 1", n)
	}

	// The namespace leaves the selection; the leader's namespace cache still shows it in.
	laggingNamespaces := memstore.New(nil)
	laggingNamespaces.Put(hosted.DeepCopy())
	out := hosted.DeepCopy()
	delete(out.Labels, "tier")
	store.Put(out)
	// The tenant's change, which no guard judged, and kube's ReplicaSet for it.
	store.Put(deployment(2, "web:2"))
	store.Put(replicaSet("a1", "1", "web:1", 0, now.Add(-time.Hour)))
	store.Put(replicaSet("b2", "2", "web:2", 2, now.Add(-time.Second)))
	c := lagging{Writer: memstore.Writer{Store: store}, cache: laggingNamespaces,
		lags: func(obj client.Object) bool { return obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" }}

	if _, err := recorder(store, c).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n, retired := revisions(); n != 1 || !retired {
		t.Errorf("after a change made outside the selection the journal holds %d revisions (retired %t), want the one it had, retired", n, retired)
	}
	// Without the live read the unjudged template was journaled: what the read prevents.
	if _, err := recorder(nil, c).Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n, _ := revisions(); n != 2 {
		t.Errorf("reading the lagging cache alone, the journal holds %d revisions; the test no longer shows the race", n)
	}
}
