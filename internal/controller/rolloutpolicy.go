// Package controller holds holdfast's leader-elected policy status controllers. Each
// Reconcile reads what it needs from the cache and hands it to a pure function that
// computes the status (status.go); it writes only when the status changed.
package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/enqueue"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// RolloutPolicyStatus keeps each RolloutPolicy's status: whether it is in force, and how
// many workloads it selects.
type RolloutPolicyStatus struct {
	Client client.Client
	// Matcher evaluates the policies' targets; nil compiles their selectors anew.
	Matcher *policy.Matcher
	// Journals are the revision journals, for the rollouts in flight under a fleet limit.
	Journals *journal.Store
	// Audit evaluates a selected workload as it stands (rollout.Audit); nil audits nothing.
	Audit func(p *v1alpha1.RolloutPolicy, obj client.Object, nsLabels map[string]string, now time.Time) (decision.Violations, error)
	// AuditEvery is how often the audit runs beside policy changes; 0 means 5 minutes.
	AuditEvery time.Duration
	// Events records a PolicyViolation Event per violating workload in Audit and Warn mode.
	Events *events.Limiter
	// Metrics say which policies are not in force; nil records nothing.
	Metrics *PolicyMetrics
	Clock   clock.PassiveClock
}

// +kubebuilder:rbac:groups=holdfast.dev,resources=rolloutpolicies/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch

// inFlightResync is how often the rollouts in flight under a fleet limit are looked at again
// while there are any.
const inFlightResync = 30 * time.Second

// statusDelay coalesces the events that can change policy statuses: statuses follow the
// cluster within about a second, and a burst of workload changes costs one reconcile per
// policy and second.
const statusDelay = time.Second

// SetupWithManager watches policies, and workloads and namespaces only where their
// creation, deletion or labels can change what a policy selects.
func (r *RolloutPolicyStatus) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueue.Coalesced(statusDelay, r.allPolicies)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("rolloutpolicy-status").
		For(&v1alpha1.RolloutPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(policy.NamespaceMetadata(), all, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// The revision journals say which rollouts are in flight (rules.concurrency).
		Watches(&corev1.ConfigMap{}, all, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[journal.ComponentLabel] == journal.Component
		})))
	return watchWorkloadLabels(b, all).Complete(r)
}

// watchWorkloadLabels adds a watch on every guarded kind for what can change what a policy
// selects: creations, deletions and changes of labels.
func watchWorkloadLabels(b *builder.TypedBuilder[reconcile.Request], h handler.EventHandler) *builder.TypedBuilder[reconcile.Request] {
	for _, k := range workload.Kinds() {
		obj, _ := workload.New(k)
		b = b.Watches(obj, h, builder.WithPredicates(predicate.LabelChangedPredicate{}))
	}
	return b
}

func (r *RolloutPolicyStatus) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	return enqueue.All(ctx, r.Client, &v1alpha1.RolloutPolicy{}, &v1alpha1.RolloutPolicyList{}, "")
}

// Reconcile computes the policy's status and writes it only when it changed.
func (r *RolloutPolicyStatus) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.RolloutPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget("RolloutPolicy", req.Name)
			r.Metrics.forgetFights(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nsLabels, err := policy.AllNamespaceLabels(ctx, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	// One list of the workloads serves the whole status: the count, the fleet's rollouts
	// in flight, the writers and the audit all read the ones the policy selects.
	workloads, err := labelledWorkloads(ctx, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	status, selected := rolloutPolicyStatus(r.Matcher, p, workloads, nsLabels)
	now := r.Clock.Now()
	next := rolloutWindows(p, status, now)
	if ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady); ready != nil {
		r.Metrics.ready("RolloutPolicy", p.Name, *ready)
	}
	if status.InFlight, status.InFlightWorkloads = nil, nil; p.Spec.Rules.Concurrency != nil {
		var names []string
		for _, slot := range r.Journals.FleetSlots(p, refs(selected), now) {
			if !slot.Released {
				names = append(names, slot.Name())
				continue
			}
			// The breaker lets the fleet go on: say so where the workload's owner looks.
			if obj, err := workload.New(slot.Ref.Kind); err == nil {
				obj.SetNamespace(slot.Ref.Namespace)
				obj.SetName(slot.Ref.Name)
				obj.SetUID(slot.Ref.UID)
				r.Events.Warn(obj, "slot/"+p.Name, now, "StalledSlotReleased", fmt.Sprintf(
					"the rollout stalled at %s and no longer holds a slot of RolloutPolicy %s's maxInFlight after its stalledSlotLifetime of %s; "+
						"roll it back or fix it", slot.StalledSince.UTC().Format(time.RFC3339), p.Name, journal.SlotLifetime(p.Spec.Rules.Concurrency)))
			}
		}
		slices.Sort(names)
		status.InFlight, status.InFlightWorkloads = ptr.To(int32(len(names))), names[:min(len(names), 20)]
		if len(names) > 0 && (next.IsZero() || next.After(now.Add(inFlightResync))) {
			// A rollout stalls by the clock, with no event to say so.
			next = now.Add(inFlightResync)
		}
	}
	if at := r.writers(p, status, selected, now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if r.Audit != nil {
		n, err := r.audit(ctx, p, selected, nsLabels, now)
		if err != nil {
			return reconcile.Result{}, err
		}
		status.Violations = ptr.To(n)
		every := cmp.Or(r.AuditEvery, 5*time.Minute)
		if next.IsZero() || next.After(now.Add(every)) {
			next = now.Add(every)
		}
	}
	if equality.Semantic.DeepEqual(status, &p.Status) {
		return requeueAt(next, now), nil
	}
	p.Status = *status
	return requeueAt(next, now), r.Client.Status().Update(ctx, p)
}

// writers sets the policy's WritersFighting condition from the journals of the workloads
// it selects (none without a revertWindow, or while suspended), records a Warning Event on
// each fighting workload and the metric, and returns when the condition next changes by
// the clock alone (zero: not by the clock).
func (r *RolloutPolicyStatus) writers(p *v1alpha1.RolloutPolicy, status *v1alpha1.RolloutPolicyStatus, selected []labelled, now time.Time) time.Time {
	w := p.Spec.Rules.RevertWindow
	if w == nil || w.Duration <= 0 || p.Spec.Suspend {
		meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionWritersFighting)
		r.Metrics.fighting(p.Name, 0)
		return time.Time{}
	}
	var fights []fight
	var next time.Time
	for _, ref := range refs(selected) {
		j := r.Journals.Get(ref.Kind, ref.Namespace, ref.Name)
		if j == nil || j.UID != ref.UID {
			continue
		}
		f, ok := j.Fight(w.Duration, now)
		if !ok {
			continue
		}
		fights = append(fights, fight{workload: ref, Fight: f})
		if next.IsZero() || f.Until.Before(next) {
			next = f.Until
		}
		r.Events.Warn(workloadReference(ref), "writers/"+p.Name, now, "WritersFighting", fightNote(p, fights[len(fights)-1]))
	}
	meta.SetStatusCondition(&status.Conditions, writersFighting(p, fights))
	r.Metrics.fighting(p.Name, len(fights))
	return next
}

// workloadReference is what an Event on a workload is recorded on: its identity.
func workloadReference(ref workload.Ref) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: string(ref.Kind)},
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
	}
}

// labelled is a workload as target selectors see it: its kind, and the object as the cache
// holds it, a record or typed (read it, never write it).
type labelled struct {
	kind v1alpha1.WorkloadKind
	obj  client.Object
}

// refs are the identities of workloads.
func refs(ws []labelled) []workload.Ref {
	out := make([]workload.Ref, 0, len(ws))
	for _, w := range ws {
		out = append(out, workload.Ref{Kind: w.kind, Namespace: w.obj.GetNamespace(), Name: w.obj.GetName(), UID: w.obj.GetUID()})
	}
	return out
}

// labelledWorkloads lists every guarded workload from the cache, read-only: at thousands
// of workloads, copies would be most of what a status update costs.
func labelledWorkloads(ctx context.Context, c client.Reader) ([]labelled, error) {
	var out []labelled
	for _, k := range workload.Kinds() {
		if err := workload.Each(ctx, c, k, func(o client.Object) { out = append(out, labelled{kind: k, obj: o}) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// audit evaluates every workload the policy selects, from the cache, and counts those that
// break its request-free rules; in Audit and Warn mode each gets a PolicyViolation Event.
func (r *RolloutPolicyStatus) audit(ctx context.Context, p *v1alpha1.RolloutPolicy, selected []labelled, nsLabels map[string]map[string]string, now time.Time) (int32, error) {
	if p.Spec.Suspend {
		return 0, nil
	}
	var n int32
	reports := map[string]*policyReport{}
	for _, w := range selected {
		k, obj := w.kind, informer.Typed(w.obj) // the cache's walk hands out records
		found, err := r.Audit(p, obj, nsLabels[obj.GetNamespace()], now)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Auditing a workload", "policy", p.Name)
			continue
		}
		rep := reports[obj.GetNamespace()]
		if rep == nil {
			rep = &policyReport{}
			reports[obj.GetNamespace()] = rep
		}
		rep.add(k, obj, found, now)
		if len(found) == 0 {
			continue
		}
		n++
		if p.Spec.Mode == v1alpha1.ModeAudit || p.Spec.Mode == v1alpha1.ModeWarn {
			r.Events.Warn(obj, "audit/"+p.Name, now, "PolicyViolation", strings.Join(found.Messages(decision.Deny), "; "))
		}
	}
	return n, r.writeReports(ctx, p, reports)
}
