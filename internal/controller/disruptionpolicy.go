package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// DisruptionPolicyStatus keeps each DisruptionPolicy's Ready condition: whether its
// selectors can be evaluated and it is in force. Eviction counts are in metrics.
type DisruptionPolicyStatus struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=holdfast.dev,resources=disruptionpolicies/status,verbs=get;update;patch

// SetupWithManager watches DisruptionPolicies' specs.
func (r *DisruptionPolicyStatus) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("disruptionpolicy-status").
		For(&v1alpha1.DisruptionPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile computes the policy's Ready condition and writes it only when it changed.
func (r *DisruptionPolicyStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.DisruptionPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "the policy is in force", ObservedGeneration: p.Generation}
	for field, sel := range map[string]*metav1.LabelSelector{"namespaceSelector": p.Spec.Targets.NamespaceSelector, "selector": p.Spec.Targets.Selector} {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector
			ready.Message = fmt.Sprintf("spec.targets.%s: %v; the policy cannot be evaluated and objects to every eviction it may apply to, in its mode", field, err)
		}
	}
	if p.Spec.Suspend && ready.Status == metav1.ConditionTrue {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonSuspended, "spec.suspend is true"
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	if equality.Semantic.DeepEqual(status, &p.Status) {
		return reconcile.Result{}, nil
	}
	p.Status = *status
	return reconcile.Result{}, r.Client.Status().Update(ctx, p)
}
