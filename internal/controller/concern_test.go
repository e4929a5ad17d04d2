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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// concernWorld is a cluster of hosted and other namespaces, each with a Deployment whose
// pods are app=web and one whose pods are app=other.
func concernWorld() *memstore.Store {
	store := memstore.New(nil)
	for ns, tier := range map[string]string{"t": "hosted", "u": "other"} {
		store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tier": tier}}})
		for _, app := range []string{"web", "other"} {
			l := map[string]string{"app": app}
			store.Put(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, UID: types.UID("uid-" + ns + app), Labels: l},
				Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: l},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}}}})
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
// that reconciling each other one changes nothing: a workload left out of the queue is one
// whose reconcile had no effect.
func concernHolds(t *testing.T, store *memstore.Store, concerns concern, writes *int, reconcile func(reconcile.Request), want ...string) {
	t.Helper()
	for _, ns := range []string{"t", "u"} {
		for _, name := range []string{"web", "other"} {
			key := ns + "/" + name
			got := concerns(deployment(t, store, ns, name))
			if got != slices.Contains(want, key) {
				t.Errorf("%s concerns the controller: %v, want %v", key, got, !got)
			}
			if got {
				continue
			}
			before := *writes
			reconcile(requestFor(ns, name))
			if *writes != before {
				t.Errorf("%s does not concern the controller, but its reconcile wrote %d times", key, *writes-before)
			}
		}
	}
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
		Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))}
	look := func(req reconcile.Request) {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web")

	// A journal kept from when u/other was guarded: the recorder retires it.
	store.Put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: holdfastNamespace,
		Name: journal.Name(v1alpha1.KindDeployment, "u", "other")}})
	// Its own write of t/other's journal, which its cache does not show yet.
	r.wrote.Store(journal.Name(v1alpha1.KindDeployment, "t", "other"), ownWrite{})
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web", "t/other", "u/other")

	// Suspended, the policy selects nothing.
	p.Spec.Suspend = true
	store.Put(p)
	r.wrote.Clear()
	concernHolds(t, store, r.concern(ctx), &writes, look, "u/other")

	// The watch passes on a change that takes a workload out of the selection, for the
	// recorder to retire its journal.
	p.Spec.Suspend = false
	store.Put(p)
	was := deployment(t, store, "t", "web")
	now := was.DeepCopy()
	now.Labels = map[string]string{"app": "moved"}
	if !concerning(r.concern).Update(event.UpdateEvent{ObjectOld: was, ObjectNew: now}) {
		t.Error("the watch drops a change that takes a guarded workload out of the selection")
	}
	if concerning(r.concern).Update(event.UpdateEvent{ObjectOld: deployment(t, store, "t", "other"), ObjectNew: deployment(t, store, "t", "other")}) {
		t.Error("the watch passes on a change of a workload no policy selects, before or after")
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
	r := &PDBGenerator{Client: counting{Writer: memstore.Writer{Store: store}, writes: &writes}, Kind: v1alpha1.KindDeployment,
		Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))}
	look := func(req reconcile.Request) {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// No policy generates: none concerns it.
	concernHolds(t, store, r.concern(ctx), &writes, look)

	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: v1alpha1.DisruptionPolicySpec{
		PDB: &v1alpha1.PDBGeneration{Generate: true},
		Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "hosted"}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
	store.Put(p)
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web")

	// A policy that does not generate PDBs concerns it with nothing more.
	q := p.DeepCopy()
	q.Name, q.Spec.PDB, q.Spec.Targets.NamespaceSelector = "all", nil, nil
	store.Put(q)
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web")

	// A PDB of u/other's name: the generator reads whose it is.
	w, _ := workload.MetaOf(deployment(t, store, "u", "other"))
	store.Put(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "u", Name: pdb.Name(w.Ref)}})
	concernHolds(t, store, r.concern(ctx), &writes, look, "t/web", "u/other")
}
