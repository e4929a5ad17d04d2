package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/enqueue"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// PDBFinalizer keeps a DisruptionPolicy that generates PDBs until they are removed.
const PDBFinalizer = "holdfast.dev/pdb-cleanup"

// DisruptionPolicyStatus keeps each DisruptionPolicy's status (Ready, and for PDB
// generation the workloads selected, PDBs managed and conflicts) and its finalizer,
// which removes the generated PDBs when the policy is deleted.
type DisruptionPolicyStatus struct {
	Client client.Client
	// Matcher evaluates the policies' and PDBs' selectors; nil compiles them anew.
	Matcher *policy.Matcher
	// Metrics say which policies are not in force; nil records nothing.
	Metrics *PolicyMetrics
	Clock   clock.PassiveClock
}

// +kubebuilder:rbac:groups=holdfast.dev,resources=disruptionpolicies/status,verbs=update

// SetupWithManager watches DisruptionPolicies' specs and deletion, the generated PDBs,
// and workloads whose creation, deletion or labels can change what a policy selects.
func (r *DisruptionPolicyStatus) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueue.Coalesced(statusDelay, r.allPolicies)
	deleting := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectNew.GetDeletionTimestamp() != nil }}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("disruptionpolicy-status").
		For(&v1alpha1.DisruptionPolicy{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deleting))).
		Watches(&policyv1.PodDisruptionBudget{}, all).
		// A node joining, leaving or relabelled may carry, or drop, a topologyBudget key.
		Watches(&corev1.Node{}, all, builder.WithPredicates(predicate.LabelChangedPredicate{}))
	return watchWorkloadLabels(b, all).Complete(r)
}

func (r *DisruptionPolicyStatus) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	return enqueue.All(ctx, r.Client, &v1alpha1.DisruptionPolicy{}, &v1alpha1.DisruptionPolicyList{}, "")
}

// Reconcile handles the finalizer, then computes the status and writes it only when it changed.
func (r *DisruptionPolicyStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.DisruptionPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget("DisruptionPolicy", req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	generates := p.Spec.PDB != nil && p.Spec.PDB.Generate
	if p.DeletionTimestamp != nil || (!generates && controllerutil.ContainsFinalizer(p, PDBFinalizer)) {
		return reconcile.Result{}, r.release(ctx, p)
	}
	if generates && controllerutil.AddFinalizer(p, PDBFinalizer) {
		if err := r.Client.Update(ctx, p); err != nil {
			return reconcile.Result{}, err
		}
	}

	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	ready := disruptionPolicyReady(p)
	if p.Spec.TopologyBudget != nil && ready.Status == metav1.ConditionTrue {
		var nodes corev1.NodeList
		if err := informer.List(ctx, r.Client, &nodes); err != nil {
			return reconcile.Result{}, err
		}
		topologyReady(p, nodes.Items, &ready)
	}
	now := r.Clock.Now()
	var next time.Time
	status.WindowStatus, next = windowStatus(p.Spec.Windows, p.Spec.Exemptions, now, &ready)
	meta.SetStatusCondition(&status.Conditions, ready)
	r.Metrics.ready("DisruptionPolicy", p.Name, ready)
	if generates {
		if err := r.pdbStatus(ctx, p, status); err != nil {
			return reconcile.Result{}, err
		}
	} else {
		status.WorkloadsSelected, status.PDBsManaged, status.Conflicts = 0, 0, 0
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionPDBConflict)
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionFloorWeakened)
		r.Metrics.weakened(p.Name, 0)
	}
	if equality.Semantic.DeepEqual(status, &p.Status) {
		return requeueAt(next, now), nil
	}
	p.Status = *status
	return requeueAt(next, now), r.Client.Status().Update(ctx, p)
}

// pdbStatus counts the workloads the policy selects, the PDBs it manages and the
// workloads that get none because of a conflict.
func (r *DisruptionPolicyStatus) pdbStatus(ctx context.Context, p *v1alpha1.DisruptionPolicy, status *v1alpha1.DisruptionPolicyStatus) error {
	nsLabels, err := policy.AllNamespaceLabels(ctx, r.Client)
	if err != nil {
		return err
	}
	var selected, conflicts, weakened int32
	first, firstWeakened := "", ""
	for _, k := range workload.Kinds() {
		var generating []workload.Meta
		err := workload.Each(ctx, r.Client, k, func(o client.Object) {
			if w, ok := workload.MetaOf(o); ok && pdb.Generating(r.Matcher, p, w, nsLabels[w.Namespace]) {
				generating = append(generating, w)
			}
		})
		if err != nil {
			return err
		}
		for _, w := range generating {
			selected++
			_, conflict, err := pdb.Plan(ctx, r.Client, r.Matcher, w)
			if err != nil {
				return err
			}
			if conflict != nil {
				conflicts++
				if first == "" {
					first = conflict.Message
				}
				if conflict.Weakens {
					weakened++
					if firstWeakened == "" {
						firstWeakened = conflict.Message
					}
				}
			}
		}
	}
	var managed policyv1.PodDisruptionBudgetList
	if err := r.Client.List(ctx, &managed, pdb.Owned(p.Name)); err != nil {
		return err
	}
	status.WorkloadsSelected, status.PDBsManaged, status.Conflicts = selected, int32(len(managed.Items)), conflicts
	meta.SetStatusCondition(&status.Conditions, pdbConflict(p, conflicts, first))
	meta.SetStatusCondition(&status.Conditions, floorWeakened(p, weakened, firstWeakened))
	r.Metrics.weakened(p.Name, weakened)
	return nil
}

// release deletes the PDBs generated for the policy and removes its finalizer. The
// workload controllers then regenerate PDBs for workloads other policies still select.
func (r *DisruptionPolicyStatus) release(ctx context.Context, p *v1alpha1.DisruptionPolicy) error {
	if !controllerutil.ContainsFinalizer(p, PDBFinalizer) {
		return nil
	}
	var managed policyv1.PodDisruptionBudgetList
	if err := r.Client.List(ctx, &managed, pdb.Owned(p.Name)); err != nil {
		return err
	}
	for i := range managed.Items {
		if !pdb.Generated(&managed.Items[i]) {
			continue // the policy's label on a PDB of someone else's (a copy of a generated one)
		}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &managed.Items[i])); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(p, PDBFinalizer)
	return r.Client.Update(ctx, p)
}
