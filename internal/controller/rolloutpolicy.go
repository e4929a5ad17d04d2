// Package controller holds holdfast's leader-elected controllers.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/enqueue"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// RolloutPolicyStatus keeps each RolloutPolicy's status: whether it is in force, and how
// many workloads it selects.
type RolloutPolicyStatus struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=holdfast.dev,resources=rolloutpolicies/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch

// statusDelay coalesces the events that can change policy statuses: statuses follow the
// cluster within about a second, and a burst of workload changes costs one reconcile per
// policy and second.
const statusDelay = time.Second

// SetupWithManager watches policies, and workloads and namespaces only where their
// creation, deletion or labels can change what a policy selects.
func (r *RolloutPolicyStatus) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueue.Coalesced(statusDelay, r.allPolicies)
	labels := builder.WithPredicates(predicate.LabelChangedPredicate{})
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ctrl.NewControllerManagedBy(mgr).
		Named("rolloutpolicy-status").
		For(&v1alpha1.RolloutPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.Deployment{}, all, labels).
		Watches(&appsv1.StatefulSet{}, all, labels).
		Watches(&appsv1.DaemonSet{}, all, labels).
		WatchesMetadata(ns, all, labels).
		Complete(r)
}

func (r *RolloutPolicyStatus) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	return enqueue.All(ctx, r.Client, func() client.ObjectList { return &v1alpha1.RolloutPolicyList{} })
}

// Reconcile computes the policy's status and writes it only when it changed.
func (r *RolloutPolicyStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.RolloutPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "the policy is in force", ObservedGeneration: p.Generation}

	matched, err := r.countSelected(ctx, p.Spec.Targets)
	switch {
	case err != nil && isSelectorError(err):
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector
		ready.Message = fmt.Sprintf("%v; the policy cannot be evaluated and objects to every request it may apply to, in its mode", err)
	case err != nil:
		return reconcile.Result{}, err
	case p.Spec.Suspend:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonSuspended, "spec.suspend is true"
	}
	status.WorkloadsMatched = matched
	meta.SetStatusCondition(&status.Conditions, ready)
	if equality.Semantic.DeepEqual(status, &p.Status) {
		return reconcile.Result{}, nil
	}
	p.Status = *status
	return reconcile.Result{}, r.Client.Status().Update(ctx, p)
}

type selectorError struct{ error }

func isSelectorError(err error) bool {
	var se selectorError
	return errors.As(err, &se)
}

// countSelected counts the workloads the targets select, from the cache.
func (r *RolloutPolicyStatus) countSelected(ctx context.Context, t v1alpha1.WorkloadTargets) (int32, error) {
	nsLabels, err := namespaceLabels(ctx, r.Client)
	if err != nil {
		return 0, err
	}
	var n int32
	for _, kl := range []struct {
		kind v1alpha1.WorkloadKind
		list client.ObjectList
	}{{v1alpha1.KindDeployment, &appsv1.DeploymentList{}}, {v1alpha1.KindStatefulSet, &appsv1.StatefulSetList{}}, {v1alpha1.KindDaemonSet, &appsv1.DaemonSetList{}}} {
		// Read-only: the cache's objects, not copies; at thousands of workloads copies would
		// be most of what a status update costs.
		if err := r.Client.List(ctx, kl.list, client.UnsafeDisableDeepCopy); err != nil {
			return 0, err
		}
		objs, err := meta.ExtractList(kl.list)
		if err != nil {
			return 0, err
		}
		for _, obj := range objs {
			w, ok := obj.(client.Object)
			if !ok {
				return 0, fmt.Errorf("listing %ss: got a %T", kl.kind, obj)
			}
			ok, err := policy.Selects(t, kl.kind, nsLabels[w.GetNamespace()], w.GetLabels())
			if err != nil {
				return 0, selectorError{err}
			}
			if ok {
				n++
			}
		}
	}
	return n, nil
}
