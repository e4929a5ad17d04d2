package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// A concern says which workloads a controller has work for, as its cache shows them when
// it is made: the journal recorder and the PDB generator reconcile a workload no policy
// guards and that has nothing of theirs to no effect. It is made once per event, or per
// walk of a fleet (enqueue.Where). What it cannot read passes: the reconcile reads it
// again. Left out of their queues, a management cluster's thousands of unguarded workloads
// cost them nothing: a queue's maps keep the size of the largest burst they held, and every
// workload is one at start.
type concern func(client.Object) bool

// concerning passes the events of a workload that concerns the controller before or after
// them: a workload that stops being guarded is still reconciled, once. Deletes pass when
// allDeletes: the recorder reconciles a deleted workload from its last state, when the
// caches it judges by may have caught up (a namespace relabelled into a selection just
// before the delete).
func concerning(of func(context.Context) concern, allDeletes bool) predicate.Funcs {
	one := func(o client.Object) bool { return of(context.Background())(o) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return one(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return allDeletes || one(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return one(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			c := of(context.Background())
			return c(e.ObjectOld) || c(e.ObjectNew)
		},
	}
}

// namespaceLabels reads namespaces' labels from the cache, each once.
func namespaceLabels(ctx context.Context, c client.Reader) func(string) (map[string]string, error) {
	seen := map[string]map[string]string{}
	return func(name string) (map[string]string, error) {
		if l, ok := seen[name]; ok {
			return l, nil
		}
		l, err := policy.NamespaceLabels(ctx, c, name)
		if err == nil {
			seen[name] = l
		}
		return l, err
	}
}

// cached is whether the cache holds the object key names (or could not tell).
func cached(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) bool {
	return !apierrors.IsNotFound(informer.Get(ctx, c, key, obj))
}

// concern is the recorder's: a workload a policy selects (not suspended), or one with a
// journal, the recorder's own write its cache has not shown yet included. The policies are
// listed once, when a workload without a journal first asks.
func (r *JournalRecorder) concern(ctx context.Context) concern {
	var policies *v1alpha1.RolloutPolicyList
	nsLabels := namespaceLabels(ctx, r.Client)
	return func(o client.Object) bool {
		name := journal.Name(r.Kind, o.GetNamespace(), o.GetName())
		if _, own := r.wrote.Load(name); own || cached(ctx, r.Client, client.ObjectKey{Namespace: r.Namespace, Name: name}, &corev1.ConfigMap{}) {
			return true
		}
		if policies == nil {
			policies = &v1alpha1.RolloutPolicyList{}
			if err := informer.List(ctx, r.Client, policies); err != nil {
				policies = nil
				return true
			}
		}
		if len(policies.Items) == 0 {
			return false
		}
		ns, err := nsLabels(o.GetNamespace())
		if err != nil {
			return true
		}
		guarded, _ := r.selects(policies, o.GetLabels(), ns)
		return guarded
	}
}

// Concerns is whether the recorder has work for the workload obj as its cache shows it
// now: what its watch of the workloads passes on. A workload it is not concerned with
// reconciles to no effect.
func (r *JournalRecorder) Concerns(ctx context.Context, obj client.Object) bool {
	return r.concern(ctx)(obj)
}

// concern is the generator's: a workload a policy generates a PDB for, or one with a PDB
// of its name (Reconcile deletes a generated one no policy wants).
func (r *PDBGenerator) concern(ctx context.Context) concern {
	var generate []*v1alpha1.DisruptionPolicy
	listed := false
	nsLabels := namespaceLabels(ctx, r.Client)
	return func(o client.Object) bool {
		w, ok := workload.MetaOf(o)
		if !ok || cached(ctx, r.Client, client.ObjectKey{Namespace: w.Namespace, Name: pdb.Name(w.Ref)}, &policyv1.PodDisruptionBudget{}) {
			return true
		}
		if !listed {
			var policies v1alpha1.DisruptionPolicyList
			if err := informer.List(ctx, r.Client, &policies); err != nil {
				return true
			}
			for i := range policies.Items {
				if p := &policies.Items[i]; p.Spec.PDB != nil && p.Spec.PDB.Generate {
					generate = append(generate, p)
				}
			}
			listed = true
		}
		if len(generate) == 0 {
			return false
		}
		ns, err := nsLabels(w.Namespace)
		if err != nil {
			return true
		}
		for _, p := range generate {
			if pdb.Generating(r.Matcher, p, w, ns) {
				return true
			}
		}
		return false
	}
}
