package controller

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-dev/holdfast/internal/journal"
	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// JournalRecorder is the leader's controller that writes the revision journals of the
// workloads of one kind: the only writer of journals.
type JournalRecorder struct {
	Client client.Client
	Kind   v1alpha1.WorkloadKind
	// Namespace is holdfast's own, where the journals are kept.
	Namespace string
	Matcher   *policy.Matcher
	Clock     clock.PassiveClock
	Metrics   *journal.Metrics
	// Writers say which field manager last changed each workload's template; each
	// revision is recorded with its writer. nil records none.
	Writers *informer.Writers
	// Live reads the API server: before a new revision is journaled, the workload's
	// namespace is read there, so that a template changed just after an administrator
	// relabelled the namespace out of the selection (no guard was asked) is not journaled
	// as if admitted while the leader's namespace cache still shows the old labels. nil
	// reads the cache.
	Live client.Reader

	gone sync.Map // NamespacedName → the last state of a deleted workload (lastSeen)
	// wrote holds each journal the recorder wrote until its cache shows the write
	// (ConfigMap name → ownWrite).
	wrote sync.Map
}

// ownWrite is a journal the recorder wrote, and the resourceVersion it replaced ("" for a
// create): a cache that still shows that version has not seen the write.
type ownWrite struct {
	over string
	cm   *corev1.ConfigMap
}

// +kubebuilder:rbac:groups="",namespace=holdfast-system,resources=configmaps,verbs=get;list;watch;create;update;delete

// SetupWithManager watches the workloads of the kind (their status included: that is
// where rollouts finish), the policies, and the journals themselves, so that a journal
// deleted or edited by hand is rebuilt and a deleted workload's is removed in time.
func (r *JournalRecorder) SetupWithManager(mgr ctrl.Manager) error {
	obj, err := workload.New(r.Kind)
	if err != nil {
		return err
	}
	isJournal := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Namespace && o.GetLabels()[journal.ComponentLabel] == journal.Component &&
			strings.HasPrefix(o.GetName(), "holdfast-journal-"+strings.ToLower(string(r.Kind))+"-")
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("journal-"+strings.ToLower(string(r.Kind))).
		Watches(obj, r.lastSeen(), builder.WithPredicates(concerning(r.concern, true))).
		// Every event of a policy, its status writes too: the status controller writes when
		// a namespace's labels bring workloads into a selection, which the recorder watches
		// through it.
		Watches(&v1alpha1.RolloutPolicy{}, handler.EnqueueRequestsFromMapFunc(r.allWorkloads)).
		Watches(&corev1.ConfigMap{}, r.journalEvents(), builder.WithPredicates(isJournal)).
		Complete(r)
}

func (r *JournalRecorder) allWorkloads(ctx context.Context, _ client.Object) []reconcile.Request {
	return workloadRequests(ctx, r.Client, r.Kind, "", r.concern(ctx))
}

// lastSeen enqueues the workload on every change and keeps the last state of one that is
// deleted: a deletion may come before the recorder saw the last template change, which
// an orphaning delete leaves rolling out for a re-created workload to adopt.
func (r *JournalRecorder) lastSeen() handler.EventHandler {
	return onDelete(&handler.EnqueueRequestForObject{}, func(o client.Object) {
		r.gone.Store(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, o)
	})
}

// journalEvents enqueues a journal's workload on every change to the journal. A journal
// deleted (by hand, or by another writer) forgets the recorder's own copy of its last
// write: a cache without the journal cannot tell "not seen the create yet" from "seen it,
// then the delete", and the copy would stand in for a journal that is gone.
func (r *JournalRecorder) journalEvents() handler.EventHandler {
	return onDelete(handler.EnqueueRequestsFromMapFunc(r.journaled), func(o client.Object) { r.wrote.Delete(o.GetName()) })
}

// onDelete is h, which also hands each deleted object to gone before h enqueues it.
func onDelete(h handler.EventHandler, gone func(client.Object)) handler.EventHandler {
	return handler.Funcs{
		CreateFunc:  h.Create,
		UpdateFunc:  h.Update,
		GenericFunc: h.Generic,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.Object != nil {
				gone(e.Object)
			}
			h.Delete(ctx, e, q)
		},
	}
}

// ownWriteRecheck is how soon a look that read the recorder's own copy of a journal (its
// cache lagging) is made again, so that the copy stands in for the cache only briefly.
const ownWriteRecheck = 5 * time.Second

// journaled maps a journal to its workload.
func (r *JournalRecorder) journaled(_ context.Context, o client.Object) []reconcile.Request {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return nil
	}
	j, err := journal.Decode(cm)
	if err != nil || j.Kind != r.Kind {
		return nil // an invalid journal is rebuilt when its workload next changes
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}}}
}

// Reconcile brings the workload's journal up to date with what the cache shows of it.
func (r *JournalRecorder) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, rerr error) {
	now := r.Clock.Now()
	var policies v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, r.Client, &policies); err != nil {
		return reconcile.Result{}, err
	}
	name := journal.Name(r.Kind, req.Namespace, req.Name)
	existing := stored{cm: &corev1.ConfigMap{}}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, existing.cm)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	existing.found = err == nil
	existing, own := r.latest(name, existing)
	if own {
		defer func() {
			if rerr == nil && result.IsZero() {
				result.RequeueAfter = ownWriteRecheck
			}
		}()
	}
	var j *journal.Journal
	if existing.found {
		if j, err = journal.Decode(existing.cm); err != nil {
			// Rebuilt below from the cluster's history; until then decisions read it as absent.
			existing.invalid = true
			r.Metrics.Invalid()
			logf.FromContext(ctx).Error(err, "Rebuilding an invalid revision journal")
		}
	}

	obj, err := workload.New(r.Kind)
	if err != nil {
		return reconcile.Result{}, err
	}
	err = r.Client.Get(ctx, req.NamespacedName, obj)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	var w *workload.Workload
	if err == nil && obj.GetDeletionTimestamp() == nil {
		if w, err = workload.From(obj); err != nil {
			return reconcile.Result{}, err
		}
	}
	guarded, flags, err := r.guards(ctx, &policies, w)
	if err != nil {
		return reconcile.Result{}, err
	}
	last, wasGone := r.gone.LoadAndDelete(req.NamespacedName)
	if o, ok := last.(client.Object); wasGone && ok && w != nil && j != nil && j.Deleted == nil && o.GetUID() == j.UID && w.UID != j.UID {
		// Deleted and created again between two looks (kubectl replace --force, or the two
		// events one request in the queue): the delete shows the journal's object gone,
		// which the new one was created in place of (journal lineage), as a look between
		// them would have marked it.
		seen := *j
		seen.Deleted = &now
		j = &seen
	}
	if wasGone && w == nil {
		// Record what the workload last rolled out before retiring its journal; a journal
		// lost just before the delete is rebuilt from it, so that a re-create with the
		// template it had finds that template current.
		if lw, err := workload.From(last.(client.Object)); err == nil {
			wasGuarded, lastFlags, err := r.guards(ctx, &policies, lw)
			if err != nil {
				return reconcile.Result{}, err
			}
			if j != nil || wasGuarded {
				h, err := history.ReadAdoptable(ctx, r.Client, lw)
				if err != nil {
					return reconcile.Result{}, err
				}
				// With the flags that follow its replicas: a scale it had not rolled out
				// yet is the revision it was scaling (I4), not a new one.
				j = journal.Observe(j, lw, h, lastFlags, now)
			}
		}
	}
	if !guarded {
		return r.retire(ctx, existing, j, now, journal.Retention(policies.Items))
	}

	h, err := history.Read(ctx, r.Client, w)
	if err != nil {
		return reconcile.Result{}, err
	}
	if journal.Settling(j, w, now) {
		if err := h.ReadSelected(ctx, r.Client, w); err != nil {
			return reconcile.Result{}, err
		}
	}
	next := journal.Observe(j, w, h, flags, now)
	next.Attribute(j, r.Writers.Get(w.UID))
	if len(next.Revisions) == 0 {
		// Nothing has rolled out yet (a Deployment created paused has no ReplicaSet): a
		// journal needs a revision, so there is none until one rolls out. Written anyway,
		// it would be read back as invalid and rebuilt on every look.
		return reconcile.Result{}, r.drop(ctx, existing)
	}
	if r.Live != nil && newRevision(j, next) {
		// The workload and namespace caches are two informers: the change may be seen
		// before a relabel the API server made first. A revision journaled here is one a
		// relabel-in later reads as known (checkEnteredChange), so it must have been guarded.
		ns := &corev1.Namespace{}
		if err := r.Live.Get(ctx, client.ObjectKey{Name: w.Namespace}, ns); err != nil {
			return reconcile.Result{}, err
		}
		if guarded, _ = r.selects(&policies, w.Labels, ns.Labels); !guarded {
			return r.retire(ctx, existing, j, now, journal.Retention(policies.Items))
		}
	}
	if reflect.DeepEqual(j, next) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.write(ctx, existing, next)
}

// guards is whether a policy selects the workload w (nil: none does), and the
// argsMatchReplicas flags of those that do.
func (r *JournalRecorder) guards(ctx context.Context, policies *v1alpha1.RolloutPolicyList, w *workload.Workload) (bool, []v1alpha1.ArgMatchesReplicas, error) {
	if w == nil {
		return false, nil, nil
	}
	nsLabels, err := policy.NamespaceLabels(ctx, r.Client, w.Namespace)
	if err != nil {
		return false, nil, err
	}
	guarded, flags := r.selects(policies, w.Labels, nsLabels)
	return guarded, flags, nil
}

// newRevision is whether next makes a template current that j did not have current (j nil:
// the workload's first journal).
func newRevision(j, next *journal.Journal) bool {
	if j == nil || j.Current() == nil {
		return true
	}
	return next.Current() == nil || next.Current().Template != j.Current().Template
}

// selects is whether a policy selects a workload of the recorder's kind labelled
// objLabels in a namespace labelled nsLabels, and the argsMatchReplicas flags of those
// that do.
func (r *JournalRecorder) selects(policies *v1alpha1.RolloutPolicyList, objLabels, nsLabels map[string]string) (bool, []v1alpha1.ArgMatchesReplicas) {
	guarded := false
	var flags []v1alpha1.ArgMatchesReplicas
	for i := range policies.Items {
		p := &policies.Items[i]
		// A policy whose selectors do not evaluate selects nothing (policy.Compile).
		if ok, _ := r.Matcher.Selects(p.Spec.Targets, r.Kind, nsLabels, objLabels); ok && !p.Spec.Suspend {
			guarded = true
			flags = append(flags, p.Spec.Rules.ArgsMatchReplicas...)
		}
	}
	return guarded, flags
}

// retire keeps the journal of a workload that is gone, or no longer guarded, for keep
// after it was seen so, then deletes it.
func (r *JournalRecorder) retire(ctx context.Context, existing stored, j *journal.Journal, now time.Time, keep time.Duration) (reconcile.Result, error) {
	switch {
	case j == nil || len(j.Revisions) == 0 || (j.Deleted != nil && now.Sub(*j.Deleted) >= keep):
		return reconcile.Result{}, r.drop(ctx, existing)
	case j.Deleted == nil:
		next := *j
		next.Deleted = ptr.To(now)
		if err := r.write(ctx, existing, &next); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: keep}, nil
	default:
		return reconcile.Result{RequeueAfter: keep - now.Sub(*j.Deleted)}, nil
	}
}

// stored is a workload's journal as the recorder read it from the cache.
type stored struct {
	cm *corev1.ConfigMap
	// found is a journal read, invalid one that did not decode: the write or delete that
	// replaces it is a rebuild.
	found, invalid bool
}

// latest is the journal as the recorder last wrote it while the cache has not seen that
// write (and true: the look is made again soon, ownWriteRecheck), else existing. Read
// from a cache that lags, a journal the recorder has just written would be written again
// over a version that is no longer stored: refused as a conflict and retried, once for
// each change while changes come faster than the cache.
func (r *JournalRecorder) latest(name string, existing stored) (stored, bool) {
	v, ok := r.wrote.Load(name)
	if !ok {
		return existing, false
	}
	w := v.(ownWrite)
	if rv := existing.cm.ResourceVersion; (existing.found && rv == w.over) || (!existing.found && w.over == "") {
		return stored{cm: w.cm.DeepCopy(), found: true}, true
	}
	// The cache shows the write, or another writer followed it.
	r.wrote.Delete(name)
	return existing, false
}

// drop deletes the journal read, if there was one.
func (r *JournalRecorder) drop(ctx context.Context, existing stored) error {
	if !existing.found {
		return nil
	}
	r.wrote.Delete(existing.cm.Name)
	err := client.IgnoreNotFound(r.Client.Delete(ctx, existing.cm, client.Preconditions{UID: &existing.cm.UID}))
	if err == nil && existing.invalid {
		r.Metrics.Rebuilt()
	}
	return err
}

// write creates or updates the journal, with the resourceVersion read: optimistic
// concurrency against a second leader's write. A journal that would read back as invalid
// is not written: retried, it would be refused again on every look, so it is logged and
// counted, and the workload's next change tries again.
func (r *JournalRecorder) write(ctx context.Context, existing stored, j *journal.Journal) error {
	cm, err := journal.Encode(j, r.Namespace)
	if errors.Is(err, journal.ErrInvalid) {
		r.Metrics.Unwritable()
		logf.FromContext(ctx).Error(err, "Not writing a revision journal that would read as invalid")
		return nil
	}
	if err != nil {
		return err
	}
	over := ""
	if !existing.found {
		err = r.Client.Create(ctx, cm)
	} else {
		over = existing.cm.ResourceVersion
		cm.ResourceVersion = over
		err = r.Client.Update(ctx, cm)
	}
	if err != nil {
		r.wrote.Delete(cm.Name)
	} else {
		r.wrote.Store(cm.Name, ownWrite{over: over, cm: cm})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return errors.Join(err, errors.New("the journal changed since it was read; reconciling again"))
	}
	if err == nil && existing.invalid {
		r.Metrics.Rebuilt()
	}
	return err
}
