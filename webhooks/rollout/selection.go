package rollout

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
