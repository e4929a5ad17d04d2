package controller

import (
	"context"
	"strings"

	"github.com/holdfast-dev/holdfast/internal/pdb"
	"k8s.io/utils/clock"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/enqueue"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// PDBGenerator keeps the generated PDB of each workload of one kind (internal/pdb says
// which).
type PDBGenerator struct {
	Client client.Client
	Kind   v1alpha1.WorkloadKind
	// Matcher evaluates policies' and PDBs' selectors; nil compiles them anew.
	Matcher *policy.Matcher
	// Events records conflicts on the workload; nil records nothing.
	Events *events.Limiter
	Clock  clock.PassiveClock
}

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=holdfast.dev,resources=disruptionpolicies,verbs=get;list;watch;update
// A generated PDB's owner reference blocks its workload's deletion, which clusters that
// enforce owner-reference permissions allow only to who may update the owner's finalizers.
// +kubebuilder:rbac:groups=apps,resources=deployments/finalizers;statefulsets/finalizers;daemonsets/finalizers,verbs=update

// SetupWithManager watches the workloads of the kind and their PDBs, the policies, the
// PDBs of others and the workloads of other kinds whose pods could overlap.
func (r *PDBGenerator) SetupWithManager(mgr ctrl.Manager) error {
	obj, err := workload.New(r.Kind)
	if err != nil {
		return err
	}
	ns := policy.NamespaceMetadata()
	inNamespace := handler.EnqueueRequestsFromMapFunc(r.workloadsInNamespace)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("pdb-"+strings.ToLower(string(r.Kind))).
		For(obj, builder.WithPredicates(concerning(r.concern, false))).
		Owns(&policyv1.PodDisruptionBudget{}).
		// Every event of a policy, its status writes too: the status controller writes when
		// a workload of the same kind comes to overlap another's pods, or a pod another PDB
		// covers enters the pod scope, which the generator sees through it.
		Watches(&v1alpha1.DisruptionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allWorkloads)).
		Watches(&policyv1.PodDisruptionBudget{}, inNamespace, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[pdb.ManagedByLabel] != pdb.ManagedBy
		}))).
		WatchesMetadata(ns, handler.EnqueueRequestsFromMapFunc(r.workloadsOfNamespace), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// Another PDB may cover pods by labels their template lacks: a relabelled pod.
		Watches(&corev1.Pod{}, inNamespace, builder.WithPredicates(podRelabelled()))
	for _, k := range workload.Kinds() {
		if k != r.Kind {
			other, _ := workload.New(k)
			b = b.Watches(other, inNamespace, builder.WithPredicates(podLabelsChanged()))
		}
	}
	return b.Complete(r)
}

// podLabelsChanged passes creations, deletions and changes of a workload's pod labels.
func podLabelsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		a, _ := workload.MetaOf(e.ObjectOld)
		b, _ := workload.MetaOf(e.ObjectNew)
		return !equality.Semantic.DeepEqual(a.PodLabels, b.PodLabels)
	}}
}

// podRelabelled passes a pod's label changes only: kube adds the labels of its own (the
// pod-template-hash) when it creates a pod, and its controller's changes pass as their
// workload's; a label written on a live pod is the rare change seen only here.
func podRelabelled() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// workloadRequests are a request for each workload of the kind in namespace ("": all)
// that concerns the controller.
func workloadRequests(ctx context.Context, c client.Reader, kind v1alpha1.WorkloadKind, namespace string, concerns concern) []reconcile.Request {
	obj, _ := workload.New(kind)
	list, _ := workload.NewList(kind)
	return enqueue.Where(ctx, c, obj, list, namespace, concerns)
}

func (r *PDBGenerator) allWorkloads(ctx context.Context, _ client.Object) []reconcile.Request {
	return workloadRequests(ctx, r.Client, r.Kind, "", r.concern(ctx))
}

func (r *PDBGenerator) workloadsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return workloadRequests(ctx, r.Client, r.Kind, o.GetNamespace(), r.concern(ctx))
}

func (r *PDBGenerator) workloadsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return workloadRequests(ctx, r.Client, r.Kind, o.GetName(), r.concern(ctx))
}

// Reconcile brings the workload's generated PDB to what the policies want: created,
// updated on a semantic diff (which reverts hand edits), or deleted.
func (r *PDBGenerator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj, err := workload.New(r.Kind)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // its PDB goes with it, by owner reference
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	w, _ := workload.MetaOf(obj)
	desired, conflict, err := pdb.Plan(ctx, r.Client, r.Matcher, w)
	if err != nil {
		return reconcile.Result{}, err
	}
	if conflict != nil {
		r.Events.Warn(obj, "pdb-conflict", r.Clock.Now(), "PDBConflict", conflict.Message+"; holdfast generates no PodDisruptionBudget for it")
		if conflict.Weakens {
			// On the PDB too: whoever owns it sees that it weakens a policy's floor.
			r.Events.Warn(conflict.By, "floor-weakened", r.Clock.Now(), "FloorWeakened", conflict.Message)
		}
	}

	existing := &policyv1.PodDisruptionBudget{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: pdb.Name(w.Ref)}, existing)
	switch {
	case apierrors.IsNotFound(err):
		if desired == nil {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, client.IgnoreAlreadyExists(r.Client.Create(ctx, desired))
	case err != nil:
		return reconcile.Result{}, err
	case !pdb.Managed(existing):
		return reconcile.Result{}, nil // a PDB of someone else's that happens to bear our name
	case desired == nil:
		return reconcile.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, existing))
	}
	if equality.Semantic.DeepEqual(existing.Spec, desired.Spec) && equality.Semantic.DeepEqual(existing.Labels, desired.Labels) &&
		equality.Semantic.DeepEqual(existing.OwnerReferences, desired.OwnerReferences) {
		return reconcile.Result{}, nil
	}
	existing.Spec, existing.Labels, existing.OwnerReferences = desired.Spec, desired.Labels, desired.OwnerReferences
	return reconcile.Result{}, r.Client.Update(ctx, existing)
}
