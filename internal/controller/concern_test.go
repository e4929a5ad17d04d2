package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// concernNow is when the concern tests' controllers run.
var concernNow = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// concernWorld is a cluster of hosted and other namespaces, each with two Deployments of
// two replicas, whose pods are app=web and app=other, each rolled out (a ReplicaSet).
func concernWorld() *memstore.Store {
	concernCreated := metav1.NewTime(concernNow.Add(-time.Hour))
	store := memstore.New(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID})
	for ns, tier := range map[string]string{"t": "hosted", "u": "other"} {
		store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tier": tier}}})
		for _, app := range []string{"web", "other"} {
			l := map[string]string{"app": app}
			uid := types.UID("uid-" + ns + app)
			tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: app + ":1"}}}}
			store.Put(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, UID: uid, Generation: 1, Labels: l,
				CreationTimestamp: concernCreated},
				Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: l}, Template: tmpl},
				Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}})
			rsTmpl := *tmpl.DeepCopy()
			rsTmpl.Labels = map[string]string{"app": app, "pod-template-hash": "5d4f"}
			store.Put(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-5d4f", UID: uid + "-rs", CreationTimestamp: concernCreated,
				Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: app, UID: uid, Controller: ptr.To(true)}}},
				Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Template: rsTmpl},
				Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}})
		}
	}
	return store
}

func deployment(t *testing.T, store *memstore.Store, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := store.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// concernHolds checks that the concern passes exactly want of the world's Deployments, and
// reconciles each of them: one left out of the queue must be one whose reconcile writes
// nothing and records no Event. It returns the writes and Events of each reconcile.
func concernHolds(t *testing.T, store *memstore.Store, concerns concern, writes *int, reconcile func(reconcile.Request), want ...string) map[string]int {
	t.Helper()
	wrote := map[string]int{}
	for _, ns := range []string{"t", "u"} {
		for _, name := range []string{"web", "other"} {
			key := ns + "/" + name
			got := concerns(deployment(t, store, ns, name))
			if got != slices.Contains(want, key) {
				t.Errorf("%s concerns the controller: %v, want %v", key, got, !got)
			}
			before := *writes
			reconcile(requestFor(ns, name))
			wrote[key] = *writes - before
			if !got && wrote[key] != 0 {
				t.Errorf("%s does not concern the controller, but its reconcile wrote or recorded %d times", key, wrote[key])
			}
		}
	}
	return wrote
}

// counting is the store as the API server, counting the writes made through it.
type counting struct {
	memstore.Writer
	writes *int
}

func (c counting) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	*c.writes++
	return c.Writer.Create(ctx, obj, opts...)
}

func (c counting) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	*c.writes++
	return c.Writer.Update(ctx, obj, opts...)
}

func (c counting) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	*c.writes++
	return c.Writer.Delete(ctx, obj, opts...)
}

// Eventf counts an Event recorded through it (events.Limiter's recorder).
func (c counting) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
	*c.writes++
}

func workloadRef(t *testing.T, store *memstore.Store, ns, name string) workload.Ref {
	w, _ := workload.MetaOf(deployment(t, store, ns, name))
	return w.Ref
}

func requestFor(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}
}

// TestRecorderIsConcernedWithGuardedAndJournaledWorkloads: of a fleet, the recorder's
// queue gets the workloads a policy selects and those with a journal (its own write not in
// its cache yet included); the rest would reconcile to nothing.
func TestRecorderIsConcernedWithGuardedAndJournaledWorkloads(t *testing.T) {
	ctx := context.Background()
	store := concernWorld()
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "hosted"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	store.Put(p)
	var writes int
	r := &JournalRecorder{Client: counting{Writer: memstore.Writer{Store: store}, writes: &writes}, Kind: v1alpha1.KindDeployment, Namespace: holdfastNamespace,
		Clock: clocktesting.NewFakePassiveClock(concernNow)}
	look := func(req reconcile.Request) {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if wrote := concernHolds(t, store, r.concern(ctx), &writes, look, "t/web"); wrote["t/web"] == 0 {
		t.Error("the guarded t/web's reconcile wrote no journal: the check above cannot fail")
	}

	// A journal kept from when u/other was guarded: the recorder retires it.
	store.Put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: holdfastNamespace,
		Name: journal.Name(v1alpha1.KindDeployment, "u", "other")}})
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web", "u/other")
	// Its own write of t/other's journal, which its cache does not show yet.
	r.wrote.Store(journal.Name(v1alpha1.KindDeployment, "t", "other"), ownWrite{cm: &corev1.ConfigMap{}})
	if !r.concern(ctx)(deployment(t, store, "t", "other")) {
		t.Error("a workload whose journal the recorder wrote, not in its cache yet, does not concern it")
	}
	r.wrote.Clear()

	// Suspended, the policy selects nothing: t/web concerns the recorder by its journal
	// alone, which it retires.
	p.Spec.Suspend = true
	store.Put(p)
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web")

	// The watch passes on a change that takes a workload out of the selection (its journal
	// may not be in the cache yet), and every delete: the recorder reads a deleted workload's
	// last state when its caches may have caught up.
	p.Spec.Suspend = false
	store.Put(p)
	watch := concerning(r.concern, true)
	was := deployment(t, store, "t", "other")
	was.Labels = map[string]string{"app": "web"}
	if !watch.Update(event.UpdateEvent{ObjectOld: was, ObjectNew: deployment(t, store, "t", "other")}) {
		t.Error("the watch drops a change that takes a guarded workload out of the selection")
	}
	if watch.Update(event.UpdateEvent{ObjectOld: deployment(t, store, "t", "other"), ObjectNew: deployment(t, store, "t", "other")}) {
		t.Error("the watch passes on a change of a workload no policy selects, before or after")
	}
	if !watch.Delete(event.DeleteEvent{Object: deployment(t, store, "t", "other")}) {
		t.Error("the watch drops the delete of a workload no policy selects")
	}
}

// TestGeneratorIsConcernedWithGeneratingAndNamedWorkloads: of a fleet, the PDB
// generator's queue gets the workloads a policy generates a PDB for, and those with a PDB of
// their name (a generated one no policy wants any more is deleted); the rest would reconcile
// to nothing.
func TestGeneratorIsConcernedWithGeneratingAndNamedWorkloads(t *testing.T) {
	ctx := context.Background()
	store := concernWorld()
	var writes int
	c := counting{Writer: memstore.Writer{Store: store}, writes: &writes}
	r := &PDBGenerator{Client: c, Kind: v1alpha1.KindDeployment, Events: &events.Limiter{Recorder: c},
		Clock: clocktesting.NewFakePassiveClock(concernNow)}
	look := func(req reconcile.Request) {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// No policy generates: none concerns it.
	concernHolds(t, store, r.concern(ctx), &writes, look)

	// Another party's PDB over u/web's pods, which no policy selects: a conflict, were it
	// generated for, that no Event reports.
	store.Put(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "u", Name: "theirs"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.DisruptionPolicySpec{
		PDB: &v1alpha1.PDBGeneration{Generate: true}, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "hosted"}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	store.Put(p)
	if wrote := concernHolds(t, store, r.concern(ctx), &writes, look, "t/web"); wrote["t/web"] == 0 {
		t.Error("the generating t/web's reconcile wrote no PDB: the check above cannot fail")
	}

	// A policy that does not generate PDBs concerns it with nothing more.
	q := p.DeepCopy()
	q.Name, q.Spec.PDB, q.Spec.Targets.NamespaceSelector = "all", nil, nil
	store.Put(q)
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web")

	// A PDB of u/other's name: the generator reads whose it is. A generated one no policy
	// wants any more is deleted.
	store.Put(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "u", Name: pdb.Name(workloadRef(t, store, "u", "other"))}})
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web", "u/other")
	if err := store.Get(ctx, client.ObjectKey{Namespace: "t", Name: pdb.Name(workloadRef(t, store, "t", "web"))}, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Fatal(err)
	}
	p.Spec.PDB.Generate = false
	store.Put(p)
	if wrote := concernHolds(t, store, r.concern(ctx), &writes, look, "t/web", "u/other"); wrote["t/web"] == 0 {
		t.Error("t/web's PDB, which no policy wants any more, was not deleted")
	}
}
