package controller

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// TestReconcilesThePreviousReleasesPDB: the PDB release 5648181 generated for a workload is
// the one this release keeps for it: found by name, read as holdfast's, listed among the
// policy's, and left as it is when the policy asks for the same budget (no second PDB,
// which would make kube's eviction API fail for the workload's pods).
func TestReconcilesThePreviousReleasesPDB(t *testing.T) {
	ctx := context.Background()
	prev := &policyv1.PodDisruptionBudget{}
	golden.Load(t, "../pdb/testdata/previous/pdb.json", prev)
	labels := map[string]string{"app": "konnectivity-agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent", UID: "5f0c8a7e-2b1d-4e3f-9a6c-7d8e9f0a1b2c", Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4},
	}
	policy := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), PDB: &v1alpha1.PDBGeneration{Generate: true},
		Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{}}}}
	policy.Spec.Targets.Selector.MatchLabels = labels
	store := memstore.New(nil)
	store.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{corev1.LabelMetadataName: "kube-system"}}})
	store.Put(ds)
	store.Put(policy)
	store.Put(prev.DeepCopy())

	if !pdb.Managed(prev) {
		t.Error("the previous release's PDB does not read as holdfast's")
	}
	var owned policyv1.PodDisruptionBudgetList
	if err := store.List(ctx, &owned, pdb.Owned("agents")); err != nil || len(owned.Items) != 1 {
		t.Errorf("the policy's PDBs: %d, %v; want the previous release's", len(owned.Items), err)
	}
	r := &PDBGenerator{Client: memstore.Writer{Store: store}, Kind: v1alpha1.KindDaemonSet, Clock: clock.RealClock{}}
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
