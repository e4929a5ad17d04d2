package rollout

import (
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// entersSelection is an UPDATE whose labels bring the workload into the selection of a
// policy in force that did not select it: the workload is judged on what it brings
// (checkEntering), so its history is read.
func entersSelection(in Input) bool {
	if in.Operation != admissionv1.Update || in.Old == nil {
		return false
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Spec.Suspend {
			continue
		}
		if selectsNew, selectedOld, err := selection(p, in); err == nil && selectsNew && !selectedOld {
			return true
		}
	}
	return false
}

// checkEntering judges a workload its labels bring into a policy's selection on what it
// brings, in kube's terms: a rollout its controller has not finished (not observed, not
// every pod updated and available, pods left on another template) or pods of more than one
// template. Otherwise a tenant walks around every rule: orphan the workload, re-create it
// outside the selection with a new template (no guard is asked), and relabel it back in
// while both templates run. A workload with one template and a finished rollout enters
// freely; its next change is judged by the policy.
func checkEntering(in Input) []finding {
	live := liveRevisions(in.History)
	r := in.Old.Rollout
	unfinished := r.Progress.Unobserved > 0 || r.Progress.Updated < r.Progress.Target || r.Mixed
	if len(live) <= 1 && !unfinished {
		return nil // pods not yet Ready on its one template are no rollout
	}
	what := fmt.Sprintf("its rollout is not finished (%s)", r.Progress)
	if len(live) > 1 {
		what = fmt.Sprintf("%d pod templates have live pods", len(live))
	}
	return []finding{{rule: RuleSelection, field: field.NewPath("metadata", "labels"), message: fmt.Sprintf(
		"%s: the update brings the workload into the policy's selection while %s; let the rollout finish or roll it "+
			"back to one template with all pods updated, then relabel it (or relabel it as an exempt requester)%s",
		in.New, what, terminatingNote)}}
}

// checkEnteredChangeName names checkEnteredChange among the checks (a mutant of the
// mutation test removes it).
const checkEnteredChangeName = "selection/enteredChange"

// checkEnteredChange judges a workload that enters a policy's selection with a template
// other than the one the journal of its name last recorded as current: that change was
// made outside the selection (orphaned, re-created unselected with a new template, rolled
// out, relabelled back in), and its entry counts as making it now. So the policy's rate
// rules hold across the walk: the entry waits out minInterval from the recorded revision,
// a return to the template it replaced within revertWindow is flapping, and the policy's
// windows hold it. The journal is read whether or not the leader has retired it (a delete
// retires it, and it is kept for journal.Retention so that a re-create finds it).
func checkEnteredChange(in Input, spec *v1alpha1.RolloutPolicySpec) []finding {
	cur := in.Journal.Current()
	target, ok := in.New.Template.Sum()
	if cur == nil || !ok || cur.Template == "" || journal.Matches(cur, in.New.Template, flagsOf(in)) {
		return nil
	}
	path := field.NewPath("metadata", "labels")
	since := in.Now.Sub(cur.Since)
	recorded := fmt.Sprintf("%s: the update brings the workload into the policy's selection with a pod template other than "+
		"the revision %s the policy last saw become current %s ago; the change was made outside the selection and its entry counts as making it now",
		in.New, shortSum(cur.Template), round(since))
	var out []finding
	t := journal.Timeline{Revisions: in.Journal.Revisions}
	if r := spec.Rules.RevertWindow; r != nil {
		left, was := t.LeftAt(target, "")
		if flags := flagsOf(in); !was && len(flags) > 0 {
			// A template that differs from an earlier one only in the flags that follow
			// spec.replicas is a return to it, as checkRevision judges an edit.
			if shape, err := in.New.Template.Shape(flags); err == nil {
				left, was = t.LeftAt(target, shape)
			}
		}
		if was && in.Now.Sub(left) < r.Duration {
			out = append(out, finding{rule: RuleRevertWindow, field: path, message: fmt.Sprintf(
				"%s, a return to the template it replaced within %s (flapping); relabel it after %s, or go forward with a new pod template",
				recorded, r.Duration, round(r.Duration-in.Now.Sub(left)))})
		}
	}
	if r := spec.Rules.MinInterval; r != nil && len(out) == 0 && since < r.Duration {
		out = append(out, finding{rule: RuleMinInterval, field: path, message: fmt.Sprintf(
			"%s, less than the minimum interval of %s between revisions; relabel it after %s", recorded, r.Duration, round(r.Duration-since))})
	}
	if len(spec.Windows) > 0 {
		ws, _ := policy.ParseWindows(spec.Windows)
		if h := ws.At(in.Now); h.Held {
			out = append(out, finding{rule: RuleWindow, field: path, message: fmt.Sprintf(
				"%s, and new rollouts are held by the window %q; relabel it after %s (in %s)",
				recorded, h.Window, h.Until.UTC().Format(time.RFC3339), round(h.Until.Sub(in.Now)))})
		}
	}
	return out
}
