package controller

import (
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// rolloutPolicyStatus is the status of a RolloutPolicy over these workloads, in
// namespaces with these labels (by name): Ready unless its selectors are invalid or it is
// suspended, and the workloads it selects. It starts from a copy of the current status,
// so that unchanged conditions keep their transition times.
func rolloutPolicyStatus(m *policy.Matcher, p *v1alpha1.RolloutPolicy, workloads []labelled, nsLabels map[string]map[string]string) (*v1alpha1.RolloutPolicyStatus, []labelled) {
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	ready := inForce(p.Generation)
	var selected []labelled
	for _, w := range workloads {
		ok, err := m.Selects(p.Spec.Targets, w.kind, nsLabels[w.obj.GetNamespace()], w.obj.GetLabels())
		if err != nil {
			ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector
			ready.Message = fmt.Sprintf("%v; the policy cannot be evaluated: it selects nothing until it is fixed", err)
			selected = nil
			break
		}
		if ok {
			selected = append(selected, w)
		}
	}
	matched := int32(len(selected))
	if p.Spec.Suspend && ready.Status == metav1.ConditionTrue {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonSuspended, "spec.suspend is true"
	}
	status.WorkloadsMatched = matched
	meta.SetStatusCondition(&status.Conditions, ready)
	return status, selected
}

// rolloutWindows adds what the policy's windows and exemptions say at now to its status,
// and returns when that next changes.
func rolloutWindows(p *v1alpha1.RolloutPolicy, status *v1alpha1.RolloutPolicyStatus, now time.Time) time.Time {
	ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
	c := *ready
	var next time.Time
	status.WindowStatus, next = windowStatus(p.Spec.Windows, p.Spec.Exemptions, now, &c)
	meta.SetStatusCondition(&status.Conditions, c)
	return next
}

// disruptionPolicyReady is a DisruptionPolicy's Ready condition: False when a selector
// is invalid or the policy is suspended.
func disruptionPolicyReady(p *v1alpha1.DisruptionPolicy) metav1.Condition {
	ready := inForce(p.Generation)
	for _, f := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"namespaceSelector", p.Spec.Targets.NamespaceSelector}, {"selector", p.Spec.Targets.Selector}} {
		if _, err := policy.Compile(f.sel); err != nil {
			ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector
			ready.Message = fmt.Sprintf("spec.targets.%s: %v; the policy cannot be evaluated: it selects nothing until it is fixed", f.name, err)
		}
	}
	if p.Spec.Suspend && ready.Status == metav1.ConditionTrue {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1alpha1.ReasonSuspended, "spec.suspend is true"
	}
	return ready
}

// topologyReady makes ready False when no node carries the policy's topologyBudget key (a
// typo, or a cluster without zones): the budget then limits nothing, since a pod on a node
// without the key (or with it empty) is in no domain, and the policy says so rather than
// holding every drain.
func topologyReady(p *v1alpha1.DisruptionPolicy, nodes []corev1.Node, ready *metav1.Condition) {
	key, _, _ := p.Spec.TopologyBudget.Resolved()
	for i := range nodes {
		if nodes[i].Labels[key] != "" {
			return
		}
	}
	ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonTopologyKeyMissing
	ready.Message = fmt.Sprintf("spec.topologyBudget.key: no node carries the label %q; the topology budget limits no eviction until nodes carry it "+
		"(maxUnavailable and the other rules still apply)", key)
}

// pdbConflict is a generating DisruptionPolicy's PDBConflict condition: True when
// conflicts of the workloads it selects get no PDB; first names one.
func pdbConflict(p *v1alpha1.DisruptionPolicy, conflicts int32, first string) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionPDBConflict, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoConflict,
		Message: "every selected workload has its PodDisruptionBudget", ObservedGeneration: p.Generation}
	if conflicts > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonConflict
		c.Message = fmt.Sprintf("%d selected workloads get no PodDisruptionBudget; first: %s", conflicts, first)
	}
	return c
}

// floorWeakened is a generating DisruptionPolicy's FloorWeakened condition: True when
// weakened of the workloads it selects have their pods covered by another PDB that allows
// more disruptions than the policy; first names one and the way out.
func floorWeakened(p *v1alpha1.DisruptionPolicy, weakened int32, first string) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionFloorWeakened, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonFloorHeld,
		Message: "no other PodDisruptionBudget weakens the floor of a selected workload", ObservedGeneration: p.Generation}
	if weakened > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonWeakerPDB
		c.Message = fmt.Sprintf("%d selected workloads have a weaker PodDisruptionBudget than the policy as their floor; first: %s", weakened, first)
	}
	return c
}

// fight is a selected workload whose templates two writers alternate (journal.Fight).
type fight struct {
	workload workload.Ref
	journal.Fight
}

// writersFighting is a RolloutPolicy's WritersFighting condition over the fights found
// among the workloads it selects: True while there is one, naming the newest workload and
// its two writers.
func writersFighting(p *v1alpha1.RolloutPolicy, fights []fight) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionWritersFighting, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonOneWriter,
		Message: "no two writers alternate the templates of a selected workload within revertWindow", ObservedGeneration: p.Generation}
	if len(fights) == 0 {
		return c
	}
	newest := fights[0]
	for _, f := range fights[1:] {
		if f.At.After(newest.At) || (f.At.Equal(newest.At) && f.workload.String() < newest.workload.String()) {
			newest = f
		}
	}
	c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonAlternating
	c.Message = fmt.Sprintf("%d selected workloads have two writers alternating their templates within revertWindow; newest: %s, by field managers %q then %q",
		len(fights), newest.workload, newest.First, newest.Second)
	return c
}

// fightNote is the Event a workload gets while two writers alternate its templates.
func fightNote(p *v1alpha1.RolloutPolicy, f fight) string {
	return fmt.Sprintf("[%s] field managers %q and %q alternate this workload's template within revertWindow (%s): %q changed it, then %q at %s; make one of them own spec.template",
		p.Name, f.First, f.Second, p.Spec.Rules.RevertWindow.Duration, f.First, f.Second, f.At.UTC().Format(time.RFC3339))
}

// windowStatus is what a policy's windows and temporary exemptions say at now, for its
// status, and when that next changes (zero: never). A window that cannot be evaluated
// makes the policy not Ready, with the field in the message: the guards ignore it.
func windowStatus(windows []v1alpha1.Window, e v1alpha1.Exemptions, now time.Time, ready *metav1.Condition) (v1alpha1.WindowStatus, time.Time) {
	var st v1alpha1.WindowStatus
	var next time.Time
	ws, errs := policy.ParseWindows(windows)
	if len(errs) > 0 {
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidWindow
		ready.Message = fmt.Sprintf("%v; the guards ignore the windows they cannot evaluate: fix them", errs.ToAggregate())
	}
	if len(windows) > 0 {
		var at time.Time
		st.ActiveWindow, at = ws.Status(now)
		if !at.IsZero() {
			st.NextChange, next = &metav1.Time{Time: at}, at
		}
	}
	st.ExpiredExemptions = policy.Expired(e, now)
	for _, t := range e.Temporary {
		if t.Expires.After(now) && (next.IsZero() || t.Expires.Time.Before(next)) {
			next = t.Expires.Time
		}
	}
	return st, next
}

// requeueAt is the reconcile result that looks again at next (none when zero).
func requeueAt(next, now time.Time) reconcile.Result {
	if next.IsZero() {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: next.Sub(now) + time.Second}
}

func inForce(generation int64) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid,
		Message: "the policy is in force", ObservedGeneration: generation}
}
