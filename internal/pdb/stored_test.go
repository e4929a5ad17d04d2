package pdb

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestGeneratedPDBStoredForm pins the PDBs the generator writes (Desired): their names
// (kind and workload name, cut and hashed when too long), the labels by which holdfast
// finds a policy's PDBs (the policy's name cut and hashed when too long), the owner
// reference to the workload, and the budget.
func TestGeneratedPDBStoredForm(t *testing.T) {
	long := agent("Deployment", 3)
	long.Name = strings.Repeat("a-workload-with-a-long-name-", 10)
	var pdbs []*policyv1.PodDisruptionBudget
	for _, c := range []struct {
		w      workload.Meta
		policy *v1alpha1.DisruptionPolicy
	}{
		{agent("DaemonSet", 4), agentPolicy("agents", intstr.FromInt32(1), nil)},
		{agent("Deployment", 4), agentPolicy("agents", intstr.FromString("25%"), nil)},
		{long, agentPolicy(strings.Repeat("a-policy-with-a-long-name-", 3), intstr.FromInt32(1), nil)},
	} {
		p := Desired(c.w, []*v1alpha1.DisruptionPolicy{c.policy})
		if p == nil {
			t.Fatalf("no PDB for %s", c.w.Ref)
		}
		p.TypeMeta = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
		pdbs = append(pdbs, p)
	}
	golden.AssertJSON(t, "testdata/pdbs.golden", pdbs)
}

// TestReconcilesThePreviousReleasesPDB: the PDB release 5648181 generated for a workload is
// the one this release keeps for it: found by name, read as holdfast's, listed among the
// policy's, and left as it is when the policy asks for the same budget (no second PDB,
// which would make kube's eviction API fail for the workload's pods).
func TestReconcilesThePreviousReleasesPDB(t *testing.T) {
	ctx := context.Background()
	prev := &policyv1.PodDisruptionBudget{}
	golden.Load(t, "testdata/previous/pdb.json", prev)
	labels := map[string]string{"app": "konnectivity-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent", UID: "5f0c8a7e-2b1d-4e3f-9a6c-7d8e9f0a1b2c", Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4},
	}
	policy := agentPolicy("agents", intstr.FromInt32(1), nil)
	policy.Spec.Targets.Selector.MatchLabels = labels
	store := memstore.New(nil)
	store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{corev1.LabelMetadataName: "kube-system"}}})
	store.Put(ds)
	store.Put(policy)
	store.Put(prev.DeepCopy())

	if !Managed(prev) {
		t.Error("the previous release's PDB does not read as holdfast's")
	}
	var owned policyv1.PodDisruptionBudgetList
	if err := store.List(ctx, &owned, Owned("agents")); err != nil || len(owned.Items) != 1 {
		t.Errorf("the policy's PDBs: %d, %v; want the previous release's", len(owned.Items), err)
	}
	r := &Reconciler{Client: memstore.Writer{Store: store}, Kind: v1alpha1.KindDaemonSet}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: "konnectivity-agent"}}); err != nil {
		t.Fatal(err)
	}
	var all policyv1.PodDisruptionBudgetList
	if err := store.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 1 || all.Items[0].Name != prev.Name || all.Items[0].ResourceVersion != prev.ResourceVersion {
		t.Errorf("PDBs after the reconcile: %v; want the previous release's, unchanged", all.Items)
	}
}
